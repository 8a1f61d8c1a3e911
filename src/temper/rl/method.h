// The interface every RL method implements (STARE, DRE, ZPPO, REVES, GraphPO, ...): the trainer
// loop calls these hooks in order and never knows a method by name; the defaults do nothing.
// State a method keeps across steps is saved into and restored from the checkpoint as text.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "temper/rl/batch.h"
#include "temper/rl/prompt_codec.h"

namespace temper::rl {

using Metrics = std::vector<std::pair<std::string, double>>;

// Full-vocabulary teacher distributions (RCSD's reverse KL) are kept per token, for any vocabulary, while a
// score_batch call's completion tokens x V x 4 bytes stay within this budget (else it refuses, naming the fix).
inline constexpr int64_t kMaxDistillBytes = int64_t{8} << 30;

// What the trainer lends its methods: the task, the codec, the rollout settings, and generation on
// the policy's current weights through the trainer's own engine (completions in request order).
struct MethodEnv {
  std::shared_ptr<const tasks::Task> task;
  const PromptCodec* codec = nullptr;
  rollout::SamplerConfig sampler;
  int64_t max_new = 0;
  int64_t group_size = 0;  // samples per prompt (rl.group_size)
  int64_t context = 0;  // the model's context (prompt + completion tokens)
  uint64_t seed = 0;    // the run's seed
  std::function<std::vector<rollout::Completion>(const std::vector<rollout::RolloutRequest>&)> generate;
  // The reward's verifier (exceptions and timeouts score 0, as for every rollout).
  std::function<tasks::Verdict(const tasks::Problem&, const std::string&)> verify;
  // Log-probs and entropies of `tokens` after `prompt` under the policy's current weights (off-policy
  // members such as a teacher's response need them as their old log-probs).
  std::function<void(const std::vector<int32_t>& prompt, const std::vector<int32_t>& tokens, std::vector<float>& logp,
                     std::vector<float>& entropy)>
      score_tokens;
  // Log-probs of many completions after their prompts, in right-padded batches of rl.micro_batch rows (16
  // when 0), rows of similar length together (data-parallel: each rank its block, then summed); under the
  // current weights, or with `initial` under the frozen copy of the policy as RL started (the KL
  // reference; the trainer holds one when rl.kl_coef > 0 or a method needs it).
  // With `dists`, also each completion token's log-probabilities over the whole vocabulary ([tokens x V] per
  // row; any vocabulary while the call's tokens x V x 4 bytes stay within kMaxDistillBytes).
  std::function<void(const std::vector<std::vector<int32_t>>& prompts, const std::vector<std::vector<int32_t>>& tokens, bool initial,
                     std::vector<std::vector<float>>& logp, std::vector<std::vector<float>>* dists)>
      score_batch;
  // Features of a reply: the mean of the frozen starting policy's final hidden states over the reply's
  // positions after `prompt`.
  std::function<std::vector<float>(const std::vector<int32_t>& prompt, const std::vector<int32_t>& reply)> embed;
  // The current policy's final hidden states (after the final norm) at each completion token:
  // [tokens x hidden_size], row i the state after reading tokens[i].
  std::function<std::vector<float>(const std::vector<int32_t>& prompt, const std::vector<int32_t>& tokens)> hidden;
  // A request for `prompt` with the run's sampler, stop ids and max_new (cut to the context).
  rollout::RolloutRequest request(std::vector<int32_t> prompt, int64_t group, uint64_t seed, uint64_t stream) const {
    return rollout::make_request(std::move(prompt), group, max_new, context, sampler, codec->stop_ids, seed, stream);
  }
};

// One rollout round: requests[i] answers problems[first + i] (Batch::problems indices).
struct RolloutRound {
  int64_t step = 0, round = 0;
  const std::vector<tasks::Problem>* problems = nullptr;
  size_t first = 0;
  // Data-parallel: this rank runs a share of the round's requests; requests[i] is the round position
  // of its request i (null: every request, in order).
  const std::vector<int64_t>* requests = nullptr;
  int64_t index(int64_t request) const { return requests ? (*requests)[static_cast<size_t>(request)] : request; }
  const tasks::Problem& problem(int64_t request) const { return (*problems)[first + static_cast<size_t>(index(request))]; }
};

// Every round of a step (dynamic sampling draws more rounds) runs: rollout (with the methods' hooks)
// -> after_rollout -> the trainer scores what is unscored -> after_reward -> the uniform-group
// filter (problems a method built, index -1, are extra: they neither count toward prompts_per_step nor
// enter the rollout statistics); then, on the whole batch, advantages -> adjust_advantages -> token_weights -> update
// -> metrics -> after_step.
// The Batch the round hooks see holds that round's trajectories (problems: all of the step's).
class Method {
 public:
  virtual ~Method() = default;
  virtual std::string name() const = 0;
  virtual void attach(const MethodEnv&) {}  // once, when the trainer is built
  // Problems the method adds to a step's first round beside the new ones: task problems it replays
  // (ZPPO's buffer; they keep their `index` and count as task problems) or prompts it built (REVES's
  // revisions; index -1: extra groups). All are sampled, scored and filtered like new ones.
  virtual std::vector<tasks::Problem> extra_problems(int64_t /*step*/, int64_t /*new_problems*/) { return {}; }
  // Rewrite the round's problems [first, end) before their prompts are encoded (fair RL writes a
  // preference into each prompt). Called every round, after extra_problems.
  virtual void prepare_problems(std::vector<tasks::Problem>& /*problems*/, size_t /*first*/, int64_t /*step*/, int64_t /*round*/) {}
  // Per-token hook for one rollout round (stop or fork sequences); null: none.
  virtual rollout::RolloutHook* rollout_hook(const RolloutRound&) { return nullptr; }
  virtual void after_rollout(Batch&) {}  // add / replace / drop trajectories (before rewards)
  virtual void after_reward(Batch&) {}   // shaping, reward vectors -> scalar, group composition
  // Return true when the method set every trajectory's advantages itself (the estimator is skipped).
  virtual bool advantages(Batch&) { return false; }
  // After the advantages are set (by the estimator or a method): terms a method adds to them (RCSD's combine = "add").
  // The only place besides advantages() where a method writes advantages.
  virtual void adjust_advantages(Batch&) {}
  virtual void token_weights(Batch&) {}
  virtual void after_step(const Metrics&) {}  // controllers
  virtual void metrics(Metrics&) const {}     // what the method reports each step
  virtual std::string save_state() const { return {}; }
  virtual void load_state(const std::string&) {}
};

}  // namespace temper::rl
