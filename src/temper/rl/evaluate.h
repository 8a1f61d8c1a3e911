// Held-out evaluation of a policy on a task: n problems of the eval split, k samples each (greedy:
// one), scored by the task's verifier; accuracy (mean over samples), pass@k with the unbiased
// estimator of Chen et al. 2021 (1 - C(n-c, k) / C(n, k)), mean completion length, and the
// accuracy per difficulty. Rollouts through the same engine as training. With `revisions` K, also the
// share of problems solved within r = 0..K rounds of sequential revision (rl/revision.h).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "temper/core/settings.h"
#include "temper/dist/communicator.h"
#include "temper/model/int4_drafter.h"
#include "temper/model/transformer.h"
#include "temper/reward/safe_reward.h"
#include "temper/rl/prompt_codec.h"
#include "temper/rl/revision.h"
#include "temper/rollout/sampler.h"
#include "temper/rollout/spec_control.h"

namespace temper::rl {

struct EvalConfig {
  // Called every ~2 s of generation with (samples finished, samples in all, tokens generated) on this rank
  // (null: quiet).
  std::function<void(int64_t done, int64_t total, int64_t tokens)> progress;
  int64_t problems = 100;
  int64_t samples = 1;  // per problem (greedy: 1)
  bool all_examples = false;  // keep every sample in EvalResult::examples, not only each problem's first
  bool greedy = true;
  rollout::SamplerConfig sampler;  // when not greedy
  std::vector<int64_t> pass_k = {1};
  int64_t max_new = 64;
  uint64_t seed = 0;
  int64_t kv_memory_mb = 256;
  int64_t max_seqs = 64;
  // Sequential revision (samples = 1): a wrong attempt comes back with the feedback "incorrect" up to
  // `revisions` times; solved_within[r] is the share solved within r revisions.
  int64_t revisions = 0;
  RevisionConfig revision;
  // Fair multi-objective RL: the preference written before every question (empty: none), the
  // objectives measured per sample (their means and GGF_w(preference * means) are reported).
  std::vector<double> preference;
  std::string preference_prefix = "<pref {p}>\n";
  std::vector<std::string> objectives;
  std::vector<double> ggf;  // Gini weights; empty: linear
  // > 0: speculative decoding with the model's 4-bit self-drafter at this gamma (CPU), on where the
  // calibrated cost model predicts a speed-up (small live batches); the same greedy tokens.
  int64_t speculative_gamma = 0;
  DraftHead draft_head = DraftHead::bf16;
  rollout::SpecToggle speculative_toggle = rollout::SpecToggle::cost;
  void validate() const;
  void visit(KeyVisitor& v);  // [eval]: problems, samples, greedy, sampling, max_new, revisions
};

struct EvalExample {
  std::string id, prompt, completion, answer;
  int64_t sample = 0;  // which of the problem's samples
  double reward = 0;
  bool correct = false;
};

struct EvalResult {
  int64_t problems = 0, samples = 0;
  double accuracy = 0;                 // correct samples / samples
  std::map<int64_t, double> pass_at_k;  // k -> mean over problems
  double mean_len = 0;                  // completion tokens
  double mean_len_correct = 0;          // completion tokens of the correct samples (0: none)
  double truncated_frac = 0;            // samples cut at max_new or the context (no answer written: raise max_new)
  std::map<int, std::pair<int64_t, double>> by_difficulty;  // difficulty -> (samples, accuracy)
  std::vector<EvalExample> examples;    // the first sample of each problem (EvalConfig::all_examples: every sample)
  double reward_mean = 0;               // the verifier's reward, over samples
  std::vector<double> solved_within;    // revisions: [r] = share solved within r revisions (r = 0..K)
  std::vector<double> objective_means;  // per EvalConfig::objectives, over samples
  double welfare = 0;                   // GGF_w(preference * objective_means) (uniform preference when none)
  int64_t drafted = 0, accepted = 0;    // speculative: this rank's drafts over the first attempts
  std::string speculative;              // speculative: what it did, in words (empty: off)
};

double pass_at_k(int64_t n, int64_t c, int64_t k);  // unbiased estimator

// Data-parallel (comm with several ranks): each rank generates every N-th request
// (rollout::run_sharded) and every rank returns the one-process result.
EvalResult evaluate(Transformer& model, std::shared_ptr<const tasks::Task> task, const PromptCodec& codec,
                    const EvalConfig& cfg, reward::SafeReward& safe, dist::Communicator* comm = nullptr);

}  // namespace temper::rl
