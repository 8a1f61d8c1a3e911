// Tool calls in the model's own syntax: which syntax a chat template renders tool calls in, the
// parse of a generated assistant turn into content + calls (a malformed call is an error text for
// the environment's observation, never an exception), and the OpenAI-style assistant message the
// chat templates read back (transformers' convention: function.arguments is a mapping).
// Follows vLLM's hermes / llama3_json / mistral tool parsers and llama.cpp's common chat parsers.
// Leaves out: streaming (partial) parses, Llama's builtin <|python_tag|>name.call(...) form, the
// XML-ish formats (Qwen3-Coder <function=...>, GLM <arg_key>), which detect as none.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace temper::text {

enum class ToolCallFormat {
  none,
  hermes,       // <tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call>: Qwen2.5, Qwen3, Hermes-2/3
  llama3_json,  // {"name": ..., "parameters": {...}} (optionally after <|python_tag|>; ';' between calls): Llama-3.x
  mistral,      // [TOOL_CALLS][{"name": .., "arguments": {..}, "id": ..}] or [TOOL_CALLS]name[CALL_ID]id[ARGS]{...}
};

// "none" | "hermes" | "llama3_json" | "mistral".
std::string_view tool_call_format_name(ToolCallFormat f);

// What the template renders an assistant message's tool_calls as: <tool_call> + a JSON object with
// "name" is hermes (not with the XML-ish <function=...>/<arg_key> arguments nor Apriel's
// <tool_calls>[...]); [TOOL_CALLS] is mistral; Llama-3 headers with a '"parameters": ' call is
// llama3_json; anything else none.
ToolCallFormat detect_tool_call_format(std::string_view template_source);

// name: hermes | llama3_json | mistral | none | auto ("auto" and "" detect from template_source);
// an unknown name is a temper::Error listing the known ones.
ToolCallFormat tool_call_format_resolve(std::string_view name, std::string_view template_source = {});

struct ToolCall {
  std::string id;  // as the model wrote it (Mistral's "id"/[CALL_ID]), else generated: see parse_tool_calls
  std::string name;
  nlohmann::ordered_json arguments = nlohmann::ordered_json::object();  // always an object
};

struct ParsedTurn {
  std::string content;              // the text outside the calls (see parse_tool_calls)
  std::vector<ToolCall> calls;      // the well-formed calls, in order
  std::vector<std::string> errors;  // one line per malformed call: "tool call <k>: <what>"
};

// `text`: the decoded assistant turn without its end-of-turn marker. Content is the text outside
// the calls with the whitespace that touches a call removed (the templates write their own
// separators there: Qwen's "\n<tool_call>"); a turn without calls is returned verbatim. A malformed
// call (invalid JSON, no "name", arguments not an object, an unclosed <tool_call>, [TOOL_CALLS]
// without [ARGS]) is left out of calls and described in errors, numbered k = 1, 2... in the order
// the calls appear, e.g. "tool call 1: invalid JSON at byte 17: syntax error while parsing object -
// unexpected '}'; expected string literal" (byte: 0-based offset in that call's JSON text).
// Arguments given as a JSON string holding an object are decoded. Ids the format does not carry
// are "call_<k>" (Mistral: "call" + k in 5 digits, its templates want 9 alphanumerics).
// llama3_json counts a turn as calls only when it starts (after whitespace) with <|python_tag|> or
// with a JSON object that has a "name" (or whose text starts {"name"); other text is content.
ParsedTurn parse_tool_calls(std::string_view text, ToolCallFormat f);

// {"role": "assistant", "content": ..., "tool_calls": [{"id", "type": "function", "function":
// {"name", "arguments": {...}}}]}. arguments stays a mapping: Qwen2.5 and Llama-3.x always tojson
// it (a string would come out quoted), Qwen3 and Hermes-3 print a string as is, Mistral-Nemo
// tojson's the whole function. tool_calls only when there are calls (Hermes-3's template renders
// an empty list as a call turn); content "" rather than null (Qwen3 tests '</think>' in it). A
// turn with errors is kept as the model wrote it: {"role": "assistant", "content": raw_text}, so
// the history shows the malformed attempt the error observation answers.
nlohmann::ordered_json assistant_message(const ParsedTurn& turn, std::string_view raw_text);

}  // namespace temper::text
