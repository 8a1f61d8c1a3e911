// `temper eval --model M --task T [--param k=v]... [--problems N] [--samples K] [--greedy] [--json FILE]`:
// held-out accuracy of a model on a task (pass@k with the unbiased estimator, mean length, accuracy
// per difficulty), printed as a table and as JSON. `--revisions K`: the share solved within r = 0..K
// rounds of sequential revision (a wrong attempt comes back with the feedback "incorrect").
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace temper::app {

struct EvalOptions {
  std::string model, task = "arithmetic", json_out, prompt_format = "auto", revision_template;
  std::string system_prompt, user_template;  // as the training recipe's model.system_prompt / model.user_template
  std::string device = "cpu";  // cpu, cuda, cuda:N
  std::string preference, objectives, ggf, preference_prefix;  // fair multi-objective RL: the trade-off to run
  std::string samples_out;  // JSONL: every sample (id, sample, prompt, completion, answer, reward, correct)
  std::vector<std::string> params;  // task parameters key=value
  int64_t problems = 100, samples = 1, max_new = 64, revisions = 0;
  bool speculative = false;  // the model's 4-bit self-drafter where it pays (--gamma, --draft-head)
  int64_t gamma = 5;
  std::string draft_head = "bf16";
  double temperature = 1.0, top_p = 1.0;
  double reward_timeout_s = 0;  // a verification running longer scores 0 (0: no limit)
  uint64_t seed = 0;
  int threads = 0;
};

int eval(const EvalOptions& o);

}  // namespace temper::app
