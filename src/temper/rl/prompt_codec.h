// How the RL loop turns problems into token ids and completions back into text, without knowing the
// tokenizer or the chat template (the app builds one from the model's tokenizer).
#pragma once

#include <cstdint>
#include <functional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "temper/tasks/task.h"

namespace temper::rl {

struct PromptCodec {
  std::function<std::vector<int32_t>(const tasks::Problem&)> encode_prompt;  // chat template applied if any
  std::function<std::vector<int32_t>(const std::string&)> encode_completion;  // gold text -> ids, end token included
  std::function<std::vector<int32_t>(const std::string&)> encode_text;        // plain text -> ids, no special tokens
  std::function<std::string(const std::vector<int32_t>&)> decode;            // special tokens skipped
  std::function<std::string_view(int32_t)> token_bytes;
  std::set<int32_t> stop_ids;
  // How a question is asked (model.user_template around a problem's text); unset: as it is. encode_prompt
  // applies it to a problem's prompt unless a method set the text as asked (Problem::asked, rl/derived_problem.h).
  std::function<std::string(const std::string&)> phrase;
  std::string ask(const std::string& question) const { return phrase ? phrase(question) : question; }
};

}  // namespace temper::rl
