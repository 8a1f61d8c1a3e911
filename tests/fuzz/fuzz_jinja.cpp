// Fuzz harness: any bytes as a chat template must parse and render (over a fixed conversation with
// tools, under tight bounds) or throw temper::Error; never crash, hang or run out of memory.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string_view>

#include "temper/core/error.h"
#include "temper/text/jinja/json.h"
#include "temper/text/jinja/template.h"

namespace {

const temper::text::jinja::Dict& globals() {
  static const temper::text::jinja::Dict g = [] {
    temper::text::jinja::Dict d;
    d.set("messages", temper::text::jinja::from_json(nlohmann::ordered_json::parse(R"([
      {"role": "system", "content": "Be brief."},
      {"role": "user", "content": "Weather in Paris? \u00e9\ud83d\ude80"},
      {"role": "assistant", "content": "", "tool_calls": [{"id": "abc123def", "type": "function",
        "function": {"name": "get_weather", "arguments": {"city": "Paris", "days": 2}}}]},
      {"role": "tool", "tool_call_id": "abc123def", "content": {"t": 22.5, "ok": true, "n": null}},
      {"role": "assistant", "content": "<think>x</think>Sunny.", "reasoning_content": "r"}])")));
    d.set("tools", temper::text::jinja::from_json(nlohmann::ordered_json::parse(
                       R"([{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
                           "properties": {"city": {"type": "string"}}, "required": ["city"]}}}])")));
    d.set("add_generation_prompt", true);
    d.set("bos_token", "<s>");
    d.set("eos_token", "</s>");
    return d;
  }();
  return g;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view src(reinterpret_cast<const char*>(data), size);
  temper::text::jinja::Limits lim;
  lim.max_iterations = 20000;
  lim.max_output_bytes = 1 << 16;
  try {
    (void)temper::text::jinja::Template(src, "fuzz").render(globals(), lim);
  } catch (const temper::Error&) {
  }
  return 0;
}
