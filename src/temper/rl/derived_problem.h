// A problem a method builds around an existing one: ZPPO's candidate questions, REVES's revision and
// verification prompts, RCSD's rubric-conditioned teacher prompt. Same answer and checker; the text a
// template makes from the question replaces the prompt (or the last user message of a chat problem).
// The question goes into the template as the model is asked it (the codec's phrase, model.user_template),
// and the result is marked `phrased` so the codec does not wrap the user template around the whole again.
#pragma once

#include <functional>
#include <string>

#include "temper/rl/prompt_codec.h"
#include "temper/tasks/task.h"

namespace temper::rl {

tasks::Problem derive_problem(const tasks::Problem& p, const PromptCodec& codec,
                              const std::function<std::string(const std::string& question)>& wrap);

}  // namespace temper::rl
