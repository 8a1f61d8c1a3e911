// The text a chat template puts after an assistant turn for new messages (tool results, user
// turns), so a multi-turn rollout appends it to the sequence it sampled (KV cache kept, the history
// never re-rendered). Technique of verifiers/ART: render a conversation ending at an assistant turn
// without, and the same plus the new messages with, the generation prompt; the delta is what the
// longer render adds, checked to be an append (the shorter render is a prefix of the longer one).
// Leaves out: templates whose history render changes when messages follow it (Qwen3 drops an
// earlier turn's <think> once a new user message comes; Mistral moves [AVAILABLE_TOOLS] before the
// last user message): there it throws, naming the template and the first differing byte.
//
// End-of-turn contract: the engine stops a turn on ChatTemplate::end_of_turn() ("<|im_end|>",
// "<|eot_id|>", "</s>"; chat_end_of_turn() where the template refuses ChatTemplate's probe) and
// keeps that marker in the sequence. What the template writes after the marker ("\n" in ChatML)
// is the start of the continuation, never part of the turn. So, with A the assistant message of
// what the model generated and R(m, gen) the template's render:
//   R(H + A + new, true) == R(H + A, false)[: through its last end_of_turn] + continuation.
#pragma once

#include <nlohmann/json.hpp>
#include <span>
#include <string>

#include "temper/text/chat_template.h"

namespace temper::text {

// A tool's result: rendered as {"role": "tool", "content", "tool_call_id", "name"} (transformers'
// tool message; content a string, or JSON the template prints as it prints a Python dict/list).
struct ToolResult {
  std::string tool_call_id, name;
  nlohmann::ordered_json content;
};

// t.end_of_turn(), or when that is empty (the template refused ChatTemplate's tool-less [user,
// assistant] probe: Hermes-3 needs tools, some templates a system message) the same probe rendered
// with opts' tools and kwargs, then with a system message first; empty when none shows one.
std::string chat_end_of_turn(const ChatTemplate& t, const ChatRenderOptions& opts);

// The text after an assistant turn's end-of-turn marker for `new_messages` (a JSON list), up to and
// including the next generation prompt. The history is a probe: [user, assistant], then with a
// <think> block in the answer (Qwen3 renders a last assistant turn with one), then with a system
// message first; the first probe that renders as an append gives the delta. opts: tools, kwargs
// and now as the rollout's prompt was rendered with (now unset: pinned to the current time once, so
// both renders see one date); opts.add_generation_prompt is ignored (false, then true). Throws
// temper::Error naming the template, the probe and the first differing byte when no probe does.
std::string render_continuation(const ChatTemplate& t, const nlohmann::ordered_json& new_messages,
                                const ChatRenderOptions& opts);

// The same over the real history (ending with the assistant message of the turn just generated):
// exact where a template's delta depends on earlier turns, at the cost of rendering the history twice.
std::string render_continuation_after(const ChatTemplate& t, const nlohmann::ordered_json& history,
                                      const nlohmann::ordered_json& new_messages, const ChatRenderOptions& opts);

// [{"role": "tool", "content", "tool_call_id", "name"}...] for the results, in order.
nlohmann::ordered_json tool_result_messages(std::span<const ToolResult> results);

// render_continuation over tool_result_messages(results).
std::string render_tool_results(const ChatTemplate& t, std::span<const ToolResult> results,
                                const ChatRenderOptions& opts);

}  // namespace temper::text
