// Fuzz harness: any bytes as an assistant turn the policy wrote (model output, the most exposed text temper
// parses): parse_tool_calls in every format must return calls and error lines, never throw; the message built
// from it, and the text as a call's string arguments (an OpenAI client's), must read back through the
// environment's message_tool_calls (env/environment.h) without throwing.
#include <cstdint>
#include <string_view>

#include "temper/env/environment.h"
#include "temper/text/tool_calls.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using nlohmann::ordered_json;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  for (auto f : {temper::text::ToolCallFormat::hermes, temper::text::ToolCallFormat::llama3_json,
                 temper::text::ToolCallFormat::mistral}) {
    const temper::text::ParsedTurn turn = temper::text::parse_tool_calls(text, f);
    const ordered_json msg = temper::text::assistant_message(turn, text);
    (void)msg.dump(-1, ' ', false, ordered_json::error_handler_t::replace);
    (void)temper::env::message_tool_calls(msg);
  }
  ordered_json call = {{"id", "call_1"}, {"type", "function"}, {"function", {{"name", "f"}, {"arguments", text}}}};
  (void)temper::env::message_tool_calls({{"role", "assistant"}, {"content", ""}, {"tool_calls", {call}}});
  return 0;
}
