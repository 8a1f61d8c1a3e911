// Tool-call syntaxes (see tool_calls.h): detection from the template source, the parsers of the
// three syntaxes over one shared validation of a call object, and the assistant message. A call's
// extent is found by bracket matching outside JSON strings (as Python's raw_decode finds it), its
// text then parsed by nlohmann, whose parse errors give the byte the error text names.
#include "temper/text/tool_calls.h"

#include <cstdio>
#include <optional>

#include "temper/core/error.h"

namespace temper::text {

namespace {

using Json = nlohmann::ordered_json;

constexpr std::string_view kToolCallOpen = "<tool_call>";
constexpr std::string_view kToolCallClose = "</tool_call>";
constexpr std::string_view kPythonTag = "<|python_tag|>";
constexpr std::string_view kToolCalls = "[TOOL_CALLS]";
constexpr std::string_view kArgs = "[ARGS]";
constexpr std::string_view kCallId = "[CALL_ID]";

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

std::string_view lstrip(std::string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  return s;
}

std::string_view rstrip(std::string_view s) {
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

std::string_view strip(std::string_view s) {
  return rstrip(lstrip(s));
}

size_t skip_space(std::string_view s, size_t i) {
  while (i < s.size() && is_space(s[i])) ++i;
  return i;
}

// The end (one past) of the JSON object or array opening at s[i], by bracket depth outside strings;
// npos when it never closes. Does not validate: the slice is parsed afterwards.
size_t json_value_end(std::string_view s, size_t i) {
  int depth = 0;
  bool in_string = false;
  for (; i < s.size(); ++i) {
    const char c = s[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      ++depth;
    } else if (c == '}' || c == ']') {
      if (--depth == 0) return i + 1;
    }
  }
  return std::string_view::npos;
}

std::string call_prefix(int k) {
  return "tool call " + std::to_string(k) + ": ";
}

// nlohmann's "[json.exception.parse_error.101] parse error at line 1, column 17: <what>" as
// "invalid JSON at byte 16: <what>" (0-based offset of the character it stopped at).
std::string json_error_text(const nlohmann::json::parse_error& e) {
  std::string what = e.what();
  const size_t col = what.find("column ");
  if (col != std::string::npos) {
    const size_t colon = what.find(": ", col);
    if (colon != std::string::npos) what = what.substr(colon + 2);
  }
  const size_t byte = e.byte > 0 ? e.byte - 1 : 0;
  return "invalid JSON at byte " + std::to_string(byte) + ": " + what;
}

// Parses `text` as JSON; on failure appends "tool call k: invalid JSON at byte N: ..." to errors.
std::optional<Json> parse_json(std::string_view text, int k, std::vector<std::string>& errors) {
  try {
    return Json::parse(text.begin(), text.end());
  } catch (const nlohmann::json::parse_error& e) {
    errors.push_back(call_prefix(k) + json_error_text(e));
    return std::nullopt;
  } catch (const nlohmann::json::exception& e) {  // out_of_range: a number beyond double (1e999)
    errors.push_back(call_prefix(k) + "invalid JSON: " + e.what());
    return std::nullopt;
  }
}

std::string generated_id(int k, ToolCallFormat f) {
  if (f == ToolCallFormat::mistral) {  // Mistral's templates refuse ids that are not 9 alphanumerics
    char buf[16];
    std::snprintf(buf, sizeof buf, "call%05d", k % 100000);
    return buf;
  }
  return "call_" + std::to_string(k);
}

// One call object {"name": ..., <args_key>: {...} | "<json object>", "id"?}: a ToolCall, or an
// error line. args_keys: the accepted names of the arguments, the first being the one named in errors.
std::optional<ToolCall> validate_call(const Json& j, int k, std::initializer_list<std::string_view> args_keys,
                                      ToolCallFormat f, std::vector<std::string>& errors) {
  const std::string args_name(*args_keys.begin());
  auto fail = [&](const std::string& what) {
    errors.push_back(call_prefix(k) + what);
    return std::nullopt;
  };
  if (!j.is_object()) {
    return fail("expected a JSON object {\"name\": ..., \"" + args_name + "\": {...}}, got " +
                std::string(j.type_name()));
  }
  const auto name = j.find("name");
  if (name == j.end()) return fail("missing \"name\"");
  if (!name->is_string()) return fail("\"name\" must be a string, got " + std::string(name->type_name()));
  if (name->get_ref<const std::string&>().empty()) return fail("\"name\" is empty");
  auto args = j.end();
  for (std::string_view key : args_keys) {
    args = j.find(std::string(key));
    if (args != j.end()) break;
  }
  if (args == j.end()) return fail("missing \"" + args_name + "\" (an object; {} when there are none)");
  Json arguments;
  if (args->is_object()) {
    arguments = *args;
  } else if (args->is_string()) {
    const std::string& s = args->get_ref<const std::string&>();
    try {
      arguments = Json::parse(s);
    } catch (const nlohmann::json::parse_error& e) {
      return fail("\"" + args_name + "\" is a string that is not JSON: " + json_error_text(e));
    } catch (const nlohmann::json::exception& e) {  // out_of_range: a number beyond double (1e999)
      return fail("\"" + args_name + "\" is a string that is not JSON: " + e.what());
    }
    if (!arguments.is_object()) {
      return fail("\"" + args_name + "\" is a string holding " + std::string(arguments.type_name()) +
                  ", expected an object");
    }
  } else {
    return fail("\"" + args_name + "\" must be an object, got " + std::string(args->type_name()));
  }
  ToolCall call;
  call.name = name->get<std::string>();
  call.arguments = std::move(arguments);
  const auto id = j.find("id");
  call.id = id != j.end() && id->is_string() && !id->get_ref<const std::string&>().empty() ? id->get<std::string>()
                                                                                           : generated_id(k, f);
  return call;
}

// Joins the text pieces outside the calls: whitespace touching a call removed, pieces that are
// left joined by "\n".
class ContentBuilder {
 public:
  // A piece of text; before_call / after_call: whether a call touches its end / start.
  void add(std::string_view piece, bool after_call, bool before_call) {
    if (after_call) piece = lstrip(piece);
    if (before_call) piece = rstrip(piece);
    if (piece.empty()) return;
    if (!out_.empty()) out_ += '\n';
    out_ += piece;
  }
  std::string take() { return std::move(out_); }

 private:
  std::string out_;
};

ParsedTurn parse_hermes(std::string_view text) {
  ParsedTurn turn;
  ContentBuilder content;
  size_t pos = 0;
  int k = 0;
  while (true) {
    const size_t open = text.find(kToolCallOpen, pos);
    if (open == std::string_view::npos) {
      content.add(text.substr(pos), k > 0, false);
      break;
    }
    content.add(text.substr(pos, open - pos), k > 0, true);
    ++k;
    const size_t body = open + kToolCallOpen.size();
    const size_t close = text.find(kToolCallClose, body);
    if (close == std::string_view::npos) {
      turn.errors.push_back(call_prefix(k) + "unclosed <tool_call> at byte " + std::to_string(open) +
                            ": no </tool_call> follows it");
      break;
    }
    const std::string_view json = strip(text.substr(body, close - body));
    if (auto j = parse_json(json, k, turn.errors)) {
      if (auto call = validate_call(*j, k, {"arguments"}, ToolCallFormat::hermes, turn.errors)) {
        turn.calls.push_back(std::move(*call));
      }
    }
    pos = close + kToolCallClose.size();
  }
  turn.content = k == 0 ? std::string(text) : content.take();
  return turn;
}

// Whether s (at a '{') reads as a call: {"name" after whitespace.
bool starts_like_call(std::string_view s) {
  const size_t i = skip_space(s, 1);
  return s.substr(i).starts_with("\"name\"");
}

ParsedTurn parse_llama3_json(std::string_view text) {
  ParsedTurn turn;
  size_t i = skip_space(text, 0);
  const bool tagged = text.substr(i).starts_with(kPythonTag);
  if (tagged) i = skip_space(text, i + kPythonTag.size());
  if (i >= text.size() || text[i] != '{') {
    if (tagged) {
      turn.errors.push_back(call_prefix(1) +
                            "expected a JSON object {\"name\": ..., \"parameters\": {...}} after <|python_tag|>");
    } else {
      turn.content = std::string(text);
    }
    return turn;
  }
  int k = 0;
  while (true) {
    ++k;
    const size_t end = json_value_end(text, i);
    const std::string_view json = text.substr(i, end == std::string_view::npos ? std::string_view::npos : end - i);
    std::vector<std::string> errors;
    std::optional<Json> j = parse_json(json, k, errors);
    if (k == 1 && !tagged) {
      // Plain JSON content (an answer in JSON) is not a call: only {"name"... or an object with a name is.
      const bool call_like =
          j ? j->is_object() && (j->contains("name") || j->contains("parameters")) : starts_like_call(json);
      if (!call_like) {
        turn.content = std::string(text);
        return turn;
      }
    }
    if (j) {
      if (auto call = validate_call(*j, k, {"parameters", "arguments"}, ToolCallFormat::llama3_json, errors)) {
        turn.calls.push_back(std::move(*call));
      }
    }
    turn.errors.insert(turn.errors.end(), errors.begin(), errors.end());
    if (end == std::string_view::npos) return turn;  // the unclosed object took the rest
    i = skip_space(text, end);
    if (i < text.size() && text[i] == ';') {
      const size_t next = skip_space(text, i + 1);
      if (next < text.size() && text[next] == '{') {
        i = next;
        continue;
      }
      i = next;
    }
    break;
  }
  turn.content = std::string(strip(text.substr(i)));
  return turn;
}

// After [TOOL_CALLS] at s[i]: a JSON list (or one object) of calls, or name[CALL_ID]id?[ARGS]{...}.
// Returns where the parse stopped (npos: the rest was consumed by a malformed call).
size_t parse_mistral_block(std::string_view s, size_t i, int& k, ParsedTurn& turn) {
  i = skip_space(s, i);
  const std::string_view rest = s.substr(i);
  if (!rest.empty() && (rest[0] == '[' || rest[0] == '{') && !rest.starts_with(kArgs) && !rest.starts_with(kCallId)) {
    const size_t end = json_value_end(s, i);
    const std::string_view json = s.substr(i, end == std::string_view::npos ? std::string_view::npos : end - i);
    std::optional<Json> j = parse_json(json, k + 1, turn.errors);
    if (!j) {
      ++k;
      return end;
    }
    const Json list = j->is_array() ? std::move(*j) : Json::array({std::move(*j)});
    if (list.empty()) turn.errors.push_back(call_prefix(++k) + "[TOOL_CALLS] is followed by an empty list");
    for (const Json& c : list) {
      if (auto call = validate_call(c, ++k, {"arguments"}, ToolCallFormat::mistral, turn.errors)) {
        turn.calls.push_back(std::move(*call));
      }
    }
    return end;
  }
  ++k;
  const size_t args = s.find(kArgs, i);
  const size_t next_call = s.find(kToolCalls, i);
  if (args == std::string_view::npos || (next_call != std::string_view::npos && next_call < args)) {
    turn.errors.push_back(call_prefix(k) +
                          "expected name[ARGS]{...} or a JSON list after [TOOL_CALLS], found no [ARGS]");
    return next_call;
  }
  const size_t call_id = s.substr(0, args).find(kCallId, i);
  ToolCall call;
  call.name = std::string(strip(s.substr(i, (call_id == std::string_view::npos ? args : call_id) - i)));
  if (call_id != std::string_view::npos) {
    const size_t id_begin = call_id + kCallId.size();
    call.id = std::string(strip(s.substr(id_begin, args - id_begin)));
  }
  if (call.id.empty()) call.id = generated_id(k, ToolCallFormat::mistral);
  const size_t a = skip_space(s, args + kArgs.size());
  if (a >= s.size() || s[a] != '{') {
    turn.errors.push_back(call_prefix(k) + "expected a JSON object after [ARGS]");
    return s.find(kToolCalls, a);
  }
  const size_t end = json_value_end(s, a);
  const std::string_view json = s.substr(a, end == std::string_view::npos ? std::string_view::npos : end - a);
  std::optional<Json> args_json = parse_json(json, k, turn.errors);
  if (call.name.empty()) {
    turn.errors.push_back(call_prefix(k) + "missing the name between [TOOL_CALLS] and [ARGS]");
  } else if (args_json) {
    call.arguments = std::move(*args_json);
    turn.calls.push_back(std::move(call));
  }
  return end;
}

ParsedTurn parse_mistral(std::string_view text) {
  ParsedTurn turn;
  size_t at = text.find(kToolCalls);
  if (at == std::string_view::npos) {
    turn.content = std::string(text);
    return turn;
  }
  ContentBuilder content;
  content.add(text.substr(0, at), false, true);
  int k = 0;
  size_t pos = std::string_view::npos;
  while (at != std::string_view::npos) {
    pos = parse_mistral_block(text, at + kToolCalls.size(), k, turn);
    if (pos == std::string_view::npos) break;
    pos = skip_space(text, pos);
    at = text.substr(pos).starts_with(kToolCalls) ? pos : std::string_view::npos;
  }
  if (pos != std::string_view::npos) content.add(text.substr(pos), true, false);
  turn.content = content.take();
  return turn;
}

}  // namespace

std::string_view tool_call_format_name(ToolCallFormat f) {
  switch (f) {
    case ToolCallFormat::none:
      return "none";
    case ToolCallFormat::hermes:
      return "hermes";
    case ToolCallFormat::llama3_json:
      return "llama3_json";
    case ToolCallFormat::mistral:
      return "mistral";
  }
  return "none";
}

ToolCallFormat detect_tool_call_format(std::string_view src) {
  auto has = [&](std::string_view s) { return src.find(s) != std::string_view::npos; };
  if (has("[TOOL_CALLS]")) return ToolCallFormat::mistral;
  // Other syntaxes that mention <tool_call>: XML-ish arguments (Qwen3-Coder, GLM), Apriel's <tool_calls>[...] list.
  const bool xmlish = has("<function=") || has("<arg_key>") || has("<tool_calls>");
  if (has("<tool_call>") && !xmlish && (has("{\"name\"") || has("{\\\"name\\\"") || has("\"name\": \""))) {
    return ToolCallFormat::hermes;
  }
  if (has("<|start_header_id|>") && !xmlish && (has("\"parameters\": ") || has("\\\"parameters\\\": "))) {
    return ToolCallFormat::llama3_json;
  }
  return ToolCallFormat::none;
}

ToolCallFormat tool_call_format_resolve(std::string_view name, std::string_view template_source) {
  if (name.empty() || name == "auto") return detect_tool_call_format(template_source);
  for (ToolCallFormat f :
       {ToolCallFormat::none, ToolCallFormat::hermes, ToolCallFormat::llama3_json, ToolCallFormat::mistral}) {
    if (name == tool_call_format_name(f)) return f;
  }
  TEMPER_FAIL() << "unknown tool-call format '" << name
                << "'; known: hermes, llama3_json, mistral, none, auto (detect from the chat template)";
}

ParsedTurn parse_tool_calls(std::string_view text, ToolCallFormat f) {
  switch (f) {
    case ToolCallFormat::hermes:
      return parse_hermes(text);
    case ToolCallFormat::llama3_json:
      return parse_llama3_json(text);
    case ToolCallFormat::mistral:
      return parse_mistral(text);
    case ToolCallFormat::none:
      break;
  }
  ParsedTurn turn;
  turn.content = std::string(text);
  return turn;
}

nlohmann::ordered_json assistant_message(const ParsedTurn& turn, std::string_view raw_text) {
  Json m = Json::object();
  m["role"] = "assistant";
  if (!turn.errors.empty()) {
    m["content"] = std::string(raw_text);
    return m;
  }
  m["content"] = turn.content;
  if (turn.calls.empty()) return m;
  Json calls = Json::array();
  for (const ToolCall& c : turn.calls) {
    Json function = Json::object();
    function["name"] = c.name;
    function["arguments"] = c.arguments;
    Json call = Json::object();
    call["id"] = c.id;
    call["type"] = "function";
    call["function"] = std::move(function);
    calls.push_back(std::move(call));
  }
  m["tool_calls"] = std::move(calls);
  return m;
}

}  // namespace temper::text
