// The RL loop's PromptCodec from a model's tokenizer: prompts as raw text (BOS if the tokenizer adds
// one) or through the chat template (a user turn, generation prompt); gold completions end with
// the end token (EOS, or the template's end-of-turn); stop ids are EOS and end-of-turn.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "temper/rl/prompt_codec.h"
#include "temper/text/tokenizer.h"

namespace temper::app {

// format: "raw", "chat", or "auto" (chat when the tokenizer has a chat template). user_template phrases a
// problem's prompt text for the model: "{question}" stands for it ("" = the text as is); rows that carry
// their own chat messages are left alone.
rl::PromptCodec make_codec(std::shared_ptr<const text::Tokenizer> tok, const std::vector<int32_t>& eos_ids,
                           const std::string& format, const std::string& system_prompt = "",
                           const std::string& user_template = "");

// A command-line string with "\n" typed as backslash-n: those two characters become a newline.
std::string unescape_newlines(const std::string& s);

}  // namespace temper::app
