// LLM judges in `temper train`: loads a judge model (a Hugging Face directory or a GGUF file, load_model) with
// its own tokenizer and chat template (make_codec, format "auto", no system prompt of the run's) on the CPU or
// the policy's GPU, once per (path, device) however many parts of the run use it; gives the [[reward]] judge
// terms' factory and installs the loader that [rl.turing] judge = "model" and [rl.rcsd] rubric_writer use
// (rl/judge_reward.h).
#pragma once

#include <string>

#include "temper/rl/reward_set.h"

namespace temper::app {

// `policy_device`: the policy's device ("cpu", "cuda", "cuda:N"); a judge's device "cuda" means that GPU.
// Installs the process's judge model loader (rl::set_judge_model_loader) and returns the judge term factory.
rl::JudgeFactory install_judges(const std::string& policy_device);

}  // namespace temper::app
