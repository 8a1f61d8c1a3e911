// A problem a method builds around an existing one: ZPPO's candidate questions, REVES's revision and
// verification prompts, RCSD's rubric-conditioned teacher prompt, fair RL's preference. Same question,
// answer and checker (`prompt` stays the plain question); the text a template makes from the question
// as the model is asked it (the codec's phrase, model.user_template) becomes `asked`, which the codec
// sends as it is, so the user template is never wrapped around the whole. A chat problem's last user
// message gets the template too (chat messages are sent as they are).
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "temper/rl/prompt_codec.h"
#include "temper/tasks/task.h"

namespace temper::rl {

// `what` names the method in errors ("zppo", "revision", ...).
tasks::Problem derive_problem(const tasks::Problem& p, const PromptCodec& codec, const std::string& what,
                              const std::function<std::string(const std::string& question)>& wrap);

// A template with its {keys} filled in one pass: text put in (a model's attempt, a rubric) is never
// scanned for keys again.
std::string fill_template(const std::string& tmpl, const std::vector<std::pair<std::string, std::string>>& values);

}  // namespace temper::rl
