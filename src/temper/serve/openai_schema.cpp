#include "temper/serve/openai_schema.h"

#include <cmath>
#include <set>

namespace temper::serve {

using ojson = nlohmann::ordered_json;

ApiError::ApiError(int status, const std::string& message, std::string param, std::string code, std::string type)
    : std::runtime_error(message),
      status_(status),
      type_(std::move(type)),
      param_(std::move(param)),
      code_(std::move(code)) {
  if (type_.empty()) {
    type_ = status == 429 ? "rate_limit_error" : status >= 500 ? "server_error" : "invalid_request_error";
  }
}

nlohmann::json ApiError::body() const {
  nlohmann::json e = {{"message", what()}, {"type", type_}, {"param", nullptr}, {"code", nullptr}};
  if (!param_.empty()) e["param"] = param_;
  if (!code_.empty()) e["code"] = code_;
  return {{"error", e}};
}

std::string dump_json(const ojson& j) {
  return j.dump(-1, ' ', false, ojson::error_handler_t::replace);
}
std::string dump_json(const nlohmann::json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

namespace {

const char* type_name(const ojson& v) {
  switch (v.type()) {
    case ojson::value_t::null:
      return "null";
    case ojson::value_t::boolean:
      return "a boolean";
    case ojson::value_t::string:
      return "a string";
    case ojson::value_t::array:
      return "an array";
    case ojson::value_t::object:
      return "an object";
    case ojson::value_t::number_float:
      return "a number";
    default:
      return "an integer";
  }
}

[[noreturn]] void bad_type(const std::string& param, const char* expected, const ojson& got) {
  throw ApiError(400, "'" + param + "' must be " + expected + ", got " + type_name(got), param, "invalid_type");
}

[[noreturn]] void bad_value(const std::string& param, const std::string& what) {
  throw ApiError(400, "'" + param + "' " + what, param, "invalid_value");
}

// The field when present and not null.
const ojson* field(const ojson& o, const char* key) {
  auto it = o.find(key);
  return it == o.end() || it->is_null() ? nullptr : &*it;
}

std::optional<double> number(const ojson& o, const char* key) {
  const ojson* v = field(o, key);
  if (!v) return std::nullopt;
  if (!v->is_number()) bad_type(key, "a number", *v);
  const double x = v->get<double>();
  if (!std::isfinite(x)) bad_value(key, "must be finite");
  return x;
}

std::optional<int64_t> integer(const ojson& o, const char* key) {
  const ojson* v = field(o, key);
  if (!v) return std::nullopt;
  if (v->is_number_unsigned()) {
    if (v->get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) bad_value(key, "is out of range");
    return static_cast<int64_t>(v->get<uint64_t>());
  }
  if (!v->is_number_integer()) bad_type(key, "an integer", *v);
  return v->get<int64_t>();
}

std::optional<bool> boolean(const ojson& o, const char* key) {
  const ojson* v = field(o, key);
  if (!v) return std::nullopt;
  if (!v->is_boolean()) bad_type(key, "a boolean", *v);
  return v->get<bool>();
}

void in_range(const char* key, std::optional<double> x, double lo, double hi, const char* range) {
  if (x && (*x < lo || *x > hi)) bad_value(key, std::string("must be in ") + range + ", got " + std::to_string(*x));
}

void check_model(const ojson& o, const ServeLimits& lim) {
  const ojson* m = field(o, "model");
  if (!m) throw ApiError(400, "you must provide a model parameter", "model", "missing_required_parameter");
  if (!m->is_string()) bad_type("model", "a string", *m);
  const std::string name = m->get<std::string>();
  if (name != lim.model)
    throw ApiError(404, "The model `" + name + "` does not exist (this server serves `" + lim.model + "`)", "model",
                   "model_not_found", "invalid_request_error");
}

// Fields that would change the output in ways temper does not implement: refused by name.
void refuse(const ojson& o, const char* key, const std::string& why) {
  if (field(o, key))
    throw ApiError(400, "'" + std::string(key) + "' is not supported: " + why, key, "unsupported_parameter");
}

// The sampling fields both endpoints share; `chat` picks the logprobs flavour.
Sampling parse_sampling(const ojson& o, const ServeLimits& lim, bool chat) {
  Sampling s;
  rollout::SamplerConfig& sc = s.sampler;
  sc.temperature = 1.0f;
  sc.top_p = 1.0f;
  sc.penalty_last_n = -1;  // OpenAI's penalties see the whole text so far
  const auto temperature = number(o, "temperature");
  in_range("temperature", temperature, 0, 2, "[0, 2]");
  if (temperature) {
    if (*temperature == 0)
      sc.greedy = true;
    else
      sc.temperature = static_cast<float>(*temperature);
  }
  const auto top_p = number(o, "top_p");
  in_range("top_p", top_p, 0, 1, "[0, 1]");
  if (top_p) {
    if (*top_p == 0)
      sc.greedy = true;
    else
      sc.top_p = static_cast<float>(*top_p);
  }
  if (const auto k = integer(o, "top_k")) {  // vLLM's extension; -1 (vLLM) or 0: off
    if (*k < -1) bad_value("top_k", "must be -1, 0 (off) or a positive integer, got " + std::to_string(*k));
    sc.top_k = *k < 0 ? 0 : *k;
  }
  const auto min_p = number(o, "min_p");
  if (min_p && (*min_p < 0 || *min_p >= 1)) bad_value("min_p", "must be in [0, 1), got " + std::to_string(*min_p));
  if (min_p) sc.min_p = static_cast<float>(*min_p);
  const auto presence = number(o, "presence_penalty");
  in_range("presence_penalty", presence, -2, 2, "[-2, 2]");
  if (presence) sc.presence_penalty = static_cast<float>(*presence);
  const auto frequency = number(o, "frequency_penalty");
  in_range("frequency_penalty", frequency, -2, 2, "[-2, 2]");
  if (frequency) sc.frequency_penalty = static_cast<float>(*frequency);
  const auto repetition = number(o, "repetition_penalty");
  if (repetition && *repetition <= 0)
    bad_value("repetition_penalty", "must be > 0, got " + std::to_string(*repetition));
  if (repetition) sc.repetition_penalty = static_cast<float>(*repetition);

  // max_completion_tokens (the newer name) wins over max_tokens.
  for (const char* key : {"max_tokens", "max_completion_tokens"}) {
    const auto m = integer(o, key);
    if (!m) continue;
    if (*m <= 0) bad_value(key, "must be at least 1, got " + std::to_string(*m));
    if (*m > lim.context)
      bad_value(key, "is " + std::to_string(*m) + ", more than the model's context of " + std::to_string(lim.context) +
                         " tokens");
    s.max_tokens = *m;
  }

  if (const ojson* stop = field(o, "stop")) {
    if (stop->is_string()) {
      s.stop.push_back(stop->get<std::string>());
    } else if (stop->is_array()) {
      for (const ojson& x : *stop) {
        if (!x.is_string()) bad_type("stop", "a string or a list of strings", x);
        s.stop.push_back(x.get<std::string>());
      }
    } else {
      bad_type("stop", "a string or a list of strings", *stop);
    }
    if (static_cast<int64_t>(s.stop.size()) > lim.max_stop)
      bad_value("stop", "has " + std::to_string(s.stop.size()) + " strings; at most " + std::to_string(lim.max_stop));
    for (const std::string& x : s.stop)
      if (x.empty()) bad_value("stop", "must not contain an empty string");
  }

  if (const ojson* seed = field(o, "seed")) {
    if (!seed->is_number_integer()) bad_type("seed", "an integer", *seed);
    s.seed = seed->is_number_unsigned() ? seed->get<uint64_t>() : static_cast<uint64_t>(seed->get<int64_t>());
  }

  if (const auto n = integer(o, "n")) {
    if (*n < 1) bad_value("n", "must be at least 1, got " + std::to_string(*n));
    if (*n > lim.max_n)
      bad_value("n", "is " + std::to_string(*n) + "; this server runs at most " + std::to_string(lim.max_n) +
                         " sequences at once (--max-seqs)");
    s.n = *n;
  }
  if (const auto best_of = integer(o, "best_of"); best_of && *best_of != s.n)
    bad_value("best_of", "is not supported other than equal to n");

  if (chat) {
    s.logprobs = boolean(o, "logprobs").value_or(false);
    if (const auto k = integer(o, "top_logprobs")) {
      if (*k < 0 || *k > lim.max_top_logprobs)
        bad_value("top_logprobs",
                  "must be in [0, " + std::to_string(lim.max_top_logprobs) + "], got " + std::to_string(*k));
      if (!s.logprobs) bad_value("top_logprobs", "requires 'logprobs': true");
      s.top_logprobs = *k;
    }
  } else if (const ojson* lp = field(o, "logprobs")) {  // the legacy API: an integer 0..5
    if (!lp->is_number_integer()) bad_type("logprobs", "an integer", *lp);
    const int64_t k = lp->get<int64_t>();
    if (k < 0 || k > 5) bad_value("logprobs", "must be in [0, 5], got " + std::to_string(k));
    s.logprobs = true;
    s.top_logprobs = k;
  }

  s.stream = boolean(o, "stream").value_or(false);
  if (const ojson* so = field(o, "stream_options")) {
    if (!so->is_object()) bad_type("stream_options", "an object", *so);
    if (!s.stream) bad_value("stream_options", "is only allowed when 'stream' is true");
    s.include_usage = boolean(*so, "include_usage").value_or(false);
  }

  if (const ojson* lb = field(o, "logit_bias")) {
    if (!lb->is_object()) bad_type("logit_bias", "an object", *lb);
    if (!lb->empty()) refuse(o, "logit_bias", "temper samples from the policy's own logits");
  }
  if (const ojson* rf = field(o, "response_format")) {
    if (!rf->is_object()) bad_type("response_format", "an object", *rf);
    const ojson* t = field(*rf, "type");
    if (!t || !t->is_string() || t->get<std::string>() != "text")
      refuse(o, "response_format", "only {\"type\": \"text\"} (no constrained decoding)");
  }
  sc.validate();
  return s;
}

// A message's content: a string, null, or a list of text parts (joined).
ojson message_content(const ojson& c, const std::string& param) {
  if (c.is_null() || c.is_string()) return c;
  if (!c.is_array()) bad_type(param, "a string or a list of content parts", c);
  std::string text;
  for (const ojson& part : c) {
    if (!part.is_object()) bad_type(param, "a list of content parts (objects)", part);
    const ojson* type = field(part, "type");
    if (!type || !type->is_string())
      throw ApiError(400, "each content part needs a string 'type'", param, "invalid_type");
    if (type->get<std::string>() != "text")
      throw ApiError(400, "content part type '" + type->get<std::string>() + "' is not supported (text only)", param,
                     "unsupported_parameter");
    const ojson* t = field(part, "text");
    if (!t || !t->is_string()) throw ApiError(400, "a text content part needs a string 'text'", param, "invalid_type");
    text += t->get<std::string>();
  }
  return text;
}

ojson chat_messages(const ojson& o) {
  const ojson* msgs = field(o, "messages");
  if (!msgs) throw ApiError(400, "you must provide a 'messages' parameter", "messages", "missing_required_parameter");
  if (!msgs->is_array()) bad_type("messages", "an array", *msgs);
  if (msgs->empty()) bad_value("messages", "must contain at least one message");
  static const std::set<std::string> roles = {"system", "developer", "user", "assistant", "tool"};
  ojson out = ojson::array();
  for (size_t i = 0; i < msgs->size(); ++i) {
    const ojson& m = (*msgs)[i];
    const std::string at = "messages[" + std::to_string(i) + "]";
    if (!m.is_object()) bad_type(at, "an object", m);
    const ojson* role = field(m, "role");
    if (!role) throw ApiError(400, "'" + at + ".role' is required", at + ".role", "missing_required_parameter");
    if (!role->is_string()) bad_type(at + ".role", "a string", *role);
    std::string r = role->get<std::string>();
    if (!roles.count(r))
      bad_value(at + ".role", "is '" + r + "'; expected one of system, developer, user, assistant, tool");
    ojson msg = m;  // other keys (name, tool_call_id, reasoning_content...) go to the template as given
    msg["role"] = r == "developer" ? "system" : r;
    auto c = m.find("content");
    const bool has_calls = field(m, "tool_calls") != nullptr;
    if (c == m.end() || c->is_null()) {
      if (r != "assistant" || !has_calls)
        throw ApiError(400, "'" + at + ".content' is required", at + ".content", "missing_required_parameter");
      msg["content"] = nullptr;
    } else {
      msg["content"] = message_content(*c, at + ".content");
    }
    if (has_calls) {
      const ojson& calls = m["tool_calls"];
      const std::string cp = at + ".tool_calls";
      if (r != "assistant") bad_value(cp, "is only allowed in assistant messages");
      if (!calls.is_array()) bad_type(cp, "an array", calls);
      ojson conv = ojson::array();
      for (const ojson& call : calls) {
        const ojson* fn = call.is_object() ? field(call, "function") : nullptr;
        const ojson* name = fn && fn->is_object() ? field(*fn, "name") : nullptr;
        if (!name || !name->is_string())
          throw ApiError(400, "each tool call needs function.name (a string)", cp, "invalid_type");
        ojson c2 = call;
        // The API sends arguments as a JSON string; templates (as transformers') expect the object.
        if (const ojson* args = field(*fn, "arguments"); args && args->is_string()) {
          ojson parsed = ojson::parse(args->get<std::string>(), nullptr, /*allow_exceptions=*/false);
          if (!parsed.is_discarded()) c2["function"]["arguments"] = parsed;
        }
        conv.push_back(std::move(c2));
      }
      msg["tool_calls"] = std::move(conv);
    }
    out.push_back(std::move(msg));
  }
  return out;
}

ojson chat_tools(const ojson& o) {
  const ojson* tools = field(o, "tools");
  if (!tools) return nullptr;
  if (!tools->is_array()) bad_type("tools", "an array", *tools);
  for (const ojson& t : *tools) {
    const ojson* fn = t.is_object() ? field(t, "function") : nullptr;
    const ojson* name = fn && fn->is_object() ? field(*fn, "name") : nullptr;
    if (!name || !name->is_string())
      throw ApiError(400, "each tool needs {\"type\": \"function\", \"function\": {\"name\": ...}}", "tools",
                     "invalid_type");
  }
  if (const ojson* choice = field(o, "tool_choice")) {
    if (choice->is_string() && choice->get<std::string>() == "none") return nullptr;
    if (!choice->is_string() || choice->get<std::string>() != "auto")
      refuse(o, "tool_choice", "only \"auto\" and \"none\" (no forced calls)");
  }
  return tools->empty() ? ojson(nullptr) : *tools;
}

}  // namespace

ojson parse_json_object(std::string_view body) {
  ojson j = ojson::parse(body.begin(), body.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded())
    throw ApiError(400, "We could not parse the JSON body of your request: it is not valid JSON", "", "invalid_json");
  if (!j.is_object())
    throw ApiError(400, std::string("the request body must be a JSON object, got ") + type_name(j), "", "invalid_json");
  return j;
}

ChatRequest parse_chat_request(std::string_view body, const ServeLimits& lim) {
  const ojson o = parse_json_object(body);
  check_model(o, lim);
  ChatRequest r;
  r.messages = chat_messages(o);
  r.tools = chat_tools(o);
  r.s = parse_sampling(o, lim, /*chat=*/true);
  return r;
}

CompletionRequest parse_completion_request(std::string_view body, const ServeLimits& lim) {
  const ojson o = parse_json_object(body);
  check_model(o, lim);
  CompletionRequest r;
  const ojson* p = field(o, "prompt");
  if (!p) throw ApiError(400, "you must provide a 'prompt' parameter", "prompt", "missing_required_parameter");
  // A string, a token list, or a list holding one of those (one prompt per request).
  const ojson* one = p;
  if (p->is_array() && !p->empty() && (p->front().is_string() || p->front().is_array())) {
    if (p->size() != 1) bad_value("prompt", "holds " + std::to_string(p->size()) + " prompts; send one per request");
    one = &p->front();
  }
  if (one->is_string()) {
    r.prompt = one->get<std::string>();
  } else if (one->is_array()) {
    if (one->empty()) bad_value("prompt", "must not be an empty token list");
    for (const ojson& t : *one) {
      if (!t.is_number_integer()) bad_type("prompt", "a string or a list of token ids (integers)", t);
      const int64_t id = t.get<int64_t>();
      if (id < 0 || id >= lim.vocab)
        bad_value("prompt", "has token id " + std::to_string(id) + " outside the vocabulary [0, " +
                                std::to_string(lim.vocab) + ")");
      r.prompt_ids.push_back(static_cast<int32_t>(id));
    }
    r.prompt_is_ids = true;
  } else {
    bad_type("prompt", "a string or a list of token ids", *one);
  }
  if (boolean(o, "echo").value_or(false)) refuse(o, "echo", "the prompt is not repeated in the output");
  if (const ojson* sfx = field(o, "suffix"); sfx && !(sfx->is_string() && sfx->get<std::string>().empty()))
    refuse(o, "suffix", "no fill-in-the-middle");
  r.s = parse_sampling(o, lim, /*chat=*/false);
  return r;
}

int64_t resolve_max_new(const Sampling& s, int64_t prompt_tokens, const ServeLimits& lim, int64_t default_max) {
  const std::string ctx = std::to_string(lim.context);
  if (prompt_tokens >= lim.context)
    throw ApiError(400,
                   "This model's maximum context length is " + ctx + " tokens. However, your prompt is " +
                       std::to_string(prompt_tokens) + " tokens, leaving no room for a completion.",
                   "messages", "context_length_exceeded");
  const int64_t room = lim.context - prompt_tokens;
  if (s.max_tokens) {
    if (*s.max_tokens > room)
      throw ApiError(400,
                     "This model's maximum context length is " + ctx + " tokens. However, you requested " +
                         std::to_string(prompt_tokens + *s.max_tokens) + " tokens (" + std::to_string(prompt_tokens) +
                         " in the prompt, " + std::to_string(*s.max_tokens) +
                         " in the completion). Please reduce the prompt or max_tokens.",
                     "max_tokens", "context_length_exceeded");
    return *s.max_tokens;
  }
  return default_max > 0 ? std::min(default_max, room) : room;
}

}  // namespace temper::serve
