// Chat templates on the Jinja interpreter (see chat_template.h): the template variables are built
// as transformers' apply_chat_template builds them (render(messages=, tools=, documents=,
// add_generation_prompt=, **special_tokens_map, **kwargs) with strftime_now and raise_exception
// as globals).
#include "temper/text/chat_template.h"

#include "temper/core/error.h"
#include "temper/text/jinja/json.h"
#include "temper/text/jinja/template.h"
#include "temper/text/tokenizer.h"

namespace temper::text {

namespace {

using jinja::Dict;
using jinja::Value;

constexpr std::string_view kChatML =
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + "
    "'\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

// Meta-Llama-3-8B-Instruct's tokenizer_config.json chat_template.
constexpr std::string_view kLlama3 =
    "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = '<|start_header_id|>' + "
    "message['role'] + '<|end_header_id|>\\n\\n'+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 "
    "%}{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}{% if add_generation_prompt %}{{ "
    "'<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}";

Value strftime_now(const std::optional<std::tm>& pinned) {
  return Value::callable("strftime_now", [pinned](jinja::CallArgs& a) -> Value {
    if (a.args.size() != 1 || !a.args[0].is_string()) throw jinja::EvalError("strftime_now() takes one format string");
    std::tm t{};
    if (pinned) {
      t = *pinned;
    } else {
      const std::time_t now = std::time(nullptr);
      localtime_r(&now, &t);
    }
    char buf[256];
    const size_t n = std::strftime(buf, sizeof buf, a.args[0].as_string().c_str(), &t);
    if (n == 0 && !a.args[0].as_string().empty()) throw jinja::EvalError("strftime_now(): format gives no text");
    return std::string(buf, n);
  });
}

void add_tokens(Dict& g, const ChatTokens& t) {
  if (!t.bos.empty()) g.set("bos_token", t.bos);
  if (!t.eos.empty()) g.set("eos_token", t.eos);
  if (!t.unk.empty()) g.set("unk_token", t.unk);
  if (!t.pad.empty()) g.set("pad_token", t.pad);
}

Value json_value(const nlohmann::ordered_json& j, const char* what) {
  try {
    return jinja::from_json(j);
  } catch (const jinja::EvalError& e) {
    TEMPER_FAIL() << "chat template " << what << ": " << e.what();
  }
}

Dict template_globals(Value messages, const ChatTokens& tokens, const ChatRenderOptions& o) {
  Dict g;
  g.set("strftime_now", strftime_now(o.now));
  g.set("messages", std::move(messages));
  g.set("tools", o.tools.is_null() ? Value::none() : json_value(o.tools, "tools"));
  g.set("documents", o.documents.is_null() ? Value::none() : json_value(o.documents, "documents"));
  g.set("add_generation_prompt", o.add_generation_prompt);
  add_tokens(g, tokens);
  TEMPER_CHECK(o.kwargs.is_object()) << "chat template kwargs: expected a JSON object, got " << o.kwargs.type_name();
  for (auto it = o.kwargs.begin(); it != o.kwargs.end(); ++it) {
    const std::string& k = it.key();
    TEMPER_CHECK(k != "messages" && k != "tools" && k != "documents" && k != "add_generation_prompt")
        << "chat template kwargs: '" << k << "' is set by render() itself (pass it there, not as a kwarg)";
    g.set(k, json_value(it.value(), "kwargs"));
  }
  return g;
}

}  // namespace

std::string end_of_turn_after(std::string_view rendered, std::string_view answer, const std::string& eos) {
  const size_t at = rendered.rfind(answer);
  if (at == std::string_view::npos) return {};
  size_t b = at + answer.size();
  while (b < rendered.size() && std::isspace(static_cast<unsigned char>(rendered[b]))) ++b;
  size_t e = b;
  while (e < rendered.size() && !std::isspace(static_cast<unsigned char>(rendered[e]))) ++e;
  const std::string eot(rendered.substr(b, e - b));
  const bool special = eot.size() > 2 && eot.front() == '<' && eot.back() == '>';
  return special || (!eos.empty() && eot == eos) ? eot : std::string();
}

namespace {

// Renders user U, assistant A and reads what follows A up to the next whitespace: a special-token
// looking <...> or the EOS text, else nothing (a plain ']' must not become a stop token).
std::string probe_end_of_turn(const ChatTemplate& t) {
  constexpr std::string_view kAnswer = "TEMPERPROBEANSWER";
  try {
    const std::vector<ChatMessage> conv = {{"user", "TEMPERPROBEQUESTION"}, {"assistant", std::string(kAnswer)}};
    return end_of_turn_after(t.render(conv, false), kAnswer, t.eos());
  } catch (const Error&) {
    return {};
  }
}

}  // namespace

ChatTokens chat_tokens(const Tokenizer& tok) {
  auto str = [&](int32_t id) { return id >= 0 ? tok.id_to_token(id) : std::string(); };
  return {str(tok.bos_id()), str(tok.eos_id()), str(tok.unk_id()), str(tok.pad_id())};
}

ChatTemplate::ChatTemplate(std::string_view source, ChatTokens tokens, std::string name)
    : name_(std::move(name)), source_(source), tokens_(std::move(tokens)) {
  tmpl_ = std::make_shared<const jinja::Template>(source, "chat template (" + name_ + ")");
  end_of_turn_ = probe_end_of_turn(*this);
}

std::string ChatTemplate::render(const nlohmann::ordered_json& messages, const ChatRenderOptions& options) const {
  TEMPER_CHECK(messages.is_array()) << "chat template: messages must be a JSON list, got " << messages.type_name();
  return tmpl_->render(template_globals(json_value(messages, "messages"), tokens_, options));
}

std::string ChatTemplate::render(std::span<const ChatMessage> messages, bool add_generation_prompt) const {
  jinja::List list;
  for (const ChatMessage& m : messages) {
    Dict d;
    d.items.emplace_back("role", Value(m.role));
    d.items.emplace_back("content", Value(m.content));
    list.emplace_back(std::move(d));
  }
  ChatRenderOptions o;
  o.add_generation_prompt = add_generation_prompt;
  return tmpl_->render(template_globals(Value(std::move(list)), tokens_, o));
}

std::vector<std::string> chat_template_names() {
  return {"chatml", "llama3"};
}

ChatTemplate chat_template_named(std::string_view name, const ChatTokens& tokens) {
  if (name == "chatml") return ChatTemplate(kChatML, tokens, "chatml");
  if (name == "llama3") {
    ChatTokens t = tokens;
    if (t.bos.empty()) t.bos = "<|begin_of_text|>";
    return ChatTemplate(kLlama3, t, "llama3");
  }
  TEMPER_FAIL() << "unknown chat template name '" << name << "'; known: chatml, llama3 (or auto: the model's own)";
}

ChatTemplate chat_template_resolve(std::string_view override_name, std::string_view model_template,
                                   const ChatTokens& tokens) {
  if (!override_name.empty() && override_name != "auto") return chat_template_named(override_name, tokens);
  TEMPER_CHECK(!model_template.empty())
      << "the model has no chat template (tokenizer.chat_template / tokenizer_config.json chat_template); "
         "pass --chat-template chatml|llama3, or --raw for plain continuation";
  try {
    return ChatTemplate(model_template, tokens, "model");
  } catch (const Error& e) {
    TEMPER_FAIL() << e.what()
                  << ". Override the model's template with --chat-template chatml|llama3, or skip it "
                     "with --raw";
  }
}

}  // namespace temper::text
