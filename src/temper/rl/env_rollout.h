// Multi-turn rollouts against an environment (env/environment.h): each episode's first messages become
// the prompt; the engine generates an assistant turn and stops at the template's end of turn; the turn
// goes to the environment as a message (tool calls parsed in the model's syntax) on a pool of caller
// threads while the other sequences keep decoding; the observation's tokens are appended to the sequence
// (its KV cache kept: rollout/run_driver.h) and out of the loss; and so on until the environment says
// done, the turn cap or the token cap. A turn cut at env.turn_max_new tokens goes to the environment as
// it is, closed by the end-of-turn token (appended, out of the loss). An episode's return is the sum of its per-turn
// rewards; failed episodes (an environment error, a lost worker) score failure_reward and are counted.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "temper/env/environment.h"
#include "temper/rl/batch.h"
#include "temper/rl/conversation_codec.h"
#include "temper/rl/method.h"
#include "temper/rollout/engine.h"

namespace temper::rl {

struct EnvRolloutConfig {
  int64_t max_turns = 4;      // assistant turns per episode
  int64_t turn_max_new = 0;   // tokens per assistant turn (0: the completion's cap alone)
  int64_t threads = 4;        // environment calls at once
  double failure_reward = 0;  // the return of an episode the environment failed
  // true: the answer to a turn goes back answer_steps decode steps after the turn ended (waited for if it is later),
  // so which sequences decode together (and each log-prob to the last bit) is a function of the tokens, not of the
  // environment's timing; false: continuations join the batch as they arrive.
  bool deterministic = true;
  int64_t answer_steps = 4;  // measured: bench/env_throughput (docs/PERFORMANCE.md "Multi-turn rollouts")
  void validate() const;
};

// Per round, summed over its episodes.
struct EnvRolloutStats {
  int64_t episodes = 0, turns = 0, tool_calls = 0, malformed_calls = 0, failures = 0, truncated = 0, solved = 0;
  int64_t env_calls = 0;
  double env_s = 0;  // seconds inside environment calls (summed over threads)
};

// Where an RL round's trajectories come from when they are conversations (the trainer's [env]): G episodes of
// each problem in problems[first...] as scored trajectories (problem = its index in `problems`, appended spans
// out of the loss), in (problem, member) order. `request` gives the sampler, max_new (the whole conversation's
// cap), seed and stream base; its prompt is ignored. `offset` numbers problems[p] as problem offset + p in the
// episodes' names and sampling streams: an explorer rank given the block [offset, offset + problems.size()) of a
// round (rl/async_remote.h) holds the very episodes a run over the whole round would (0 for a whole round).
// EnvRollout (here) drives the conversation itself; agent/client_rollout.h lets the user's agent drive it through an
// OpenAI endpoint.
class ConversationSource {
 public:
  virtual ~ConversationSource() = default;
  virtual std::vector<Trajectory> run(rollout::RolloutEngine& engine, const std::vector<tasks::Problem>& problems,
                                      size_t first, int64_t group_size, const rollout::RolloutRequest& request,
                                      int64_t context, const std::string& episode_prefix, size_t offset) = 0;
  virtual void metrics(Metrics& m) const = 0;  // the last run's env/ metrics
  // A round conversed in blocks (explorer ranks): `into` (the earlier blocks' metrics, merged; empty before the
  // first) becomes the metrics of one run over those blocks and `block` (the next block's), by the source's rules
  // (merge_metric_blocks).
  virtual void merge_metrics(Metrics& into, const Metrics& block) const = 0;
};

// How one env/ metric of a round merges over blocks of its problems: a count (`over` empty) adds; a mean over a
// count (`over` names that count's metric, e.g. env/turns over env/episodes) becomes the mean weighted by the
// blocks' counts (equal to the whole round's up to rounding). No env/ metric is a maximum (it would take the
// larger). merge_metric_blocks merges `block` into `into` (empty: `block` as it is) by `rules`, which must name every
// metric; a metric without a rule is an error (a new metric must say how it merges).
struct MetricMerge {
  std::string name, over;
};
void merge_metric_blocks(Metrics& into, const Metrics& block, const std::vector<MetricMerge>& rules);

class EnvRollout final : public ConversationSource {
 public:
  EnvRollout(env::Environment& env, ConversationCodec codec, EnvRolloutConfig cfg);
  ~EnvRollout() override;
  std::vector<Trajectory> run(rollout::RolloutEngine& engine, const std::vector<tasks::Problem>& problems, size_t first,
                              int64_t group_size, const rollout::RolloutRequest& request, int64_t context,
                              const std::string& episode_prefix, size_t offset) override;
  const EnvRolloutStats& stats() const { return stats_; }  // of the last run
  // Counts: env/malformed_calls, env/failures, env/episodes, env/step_calls (the environment's step calls); means over
  // the episodes: env/turns, env/tool_calls, env/truncated and env/solved (shares); env/call_s: seconds per step call.
  void metrics(Metrics& m) const override;
  void merge_metrics(Metrics& into, const Metrics& block) const override;  // counts add, means weighted by theirs

 private:
  struct Impl;
  env::Environment& env_;
  ConversationCodec codec_;
  EnvRolloutConfig cfg_;
  EnvRolloutStats stats_;
};

// The row an environment's reset gets for a problem: the dataset row when it has one, else
// {"index", "split", "id", "prompt", "answer"}.
nlohmann::ordered_json env_row(const tasks::Problem& p, const char* split);

}  // namespace temper::rl
