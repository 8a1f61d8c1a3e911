// The RL loop's PromptCodec from a model's tokenizer: prompts as raw text (BOS if the tokenizer adds
// one) or through the chat template (a system turn, a user turn or a row's own turns, generation prompt);
// gold completions end with the end token (EOS, or the template's end-of-turn); stop ids are EOS and
// end-of-turn. Also: prompt lengths of a task in tokens (measure_prompts).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "temper/rl/conversation_codec.h"
#include "temper/rl/prompt_codec.h"
#include "temper/text/tokenizer.h"

namespace temper::app {

// format: "raw", "chat", or "auto" (chat when the tokenizer has a chat template). user_template phrases a
// problem's prompt text for the model: "{question}" stands for it ("" = the text as is); rows that carry
// their own chat messages (Problem::messages, TRL's conversational form) are left alone: the chat template
// renders every turn (multi-turn history included) and ends with the generation prompt, and a row whose
// first turn is a system turn keeps it instead of system_prompt (model.system_prompt: the row's wins). The
// raw format sends a chat row's prompt text alone (its last user turn; system and history are dropped).
rl::PromptCodec make_codec(std::shared_ptr<const text::Tokenizer> tok, const std::vector<int32_t>& eos_ids,
                           const std::string& format, const std::string& system_prompt = "",
                           const std::string& user_template = "");

// Multi-turn rollouts' codec from the model's chat template: the first prompt rendered with the episode's
// tools (system_prompt first when the episode has no system turn), continuations rendered as what the
// template appends after an assistant turn (text/chat_delta.h), a turn's tokens parsed for tool calls in
// `tool_format` (text/tool_calls.h; "auto": from the template). The template's clock is pinned when the
// codec is made, so every render of a run shows one date. Needs a chat template.
rl::ConversationCodec make_conversation_codec(std::shared_ptr<const text::Tokenizer> tok,
                                              const std::vector<int32_t>& eos_ids, const std::string& system_prompt,
                                              const std::string& tool_format);

// Prompt lengths in tokens (encode_prompt, templates applied) of a task's split: every problem of a finite
// split, the first `stream_rows` of a procedural stream. For a trainer that plans memory for the longest prompt
// and skips or refuses prompts over a limit before the first step instead of failing at the step that draws one.
struct PromptLengths {
  int64_t measured = 0;        // problems encoded
  int64_t longest = 0;         // tokens of the longest prompt
  std::string longest_id;      // its problem's id
  std::vector<uint64_t> over;  // indices of the problems longer than `limit` tokens (limit <= 0: none listed)
};
PromptLengths measure_prompts(const tasks::Task& task, tasks::Split split, const rl::PromptCodec& codec, int64_t limit,
                              int64_t stream_rows = 64);

// A command-line string with "\n" typed as backslash-n: those two characters become a newline.
std::string unescape_newlines(const std::string& s);

}  // namespace temper::app
