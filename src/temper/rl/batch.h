// What one RL step carries from the rollout to the update: a trajectory per sampled completion with
// its per-token fields (ids, sampling and policy log-probs, entropies, advantages, weights, whether
// each token is in the loss) and per-sequence fields (reward or reward vector, group, tags, finish),
// and the batch of them with the problems they answer. Methods read and rewrite these between the
// trainer's hooks (docs/ARCHITECTURE.md, "The road of one RL step").
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "temper/rollout/engine.h"
#include "temper/tasks/task.h"

namespace temper::rl {

// Where a trajectory came from besides plain sampling: forks and edits (DRE, GraphPO), forced tokens, or a
// member the policy did not sample (ZPPO's injected teacher response).
struct Lineage {
  int64_t parent = -1;                 // a fork or an edit of member `parent` (-1: an original sample)
  int64_t fork_pos = 0;                // tokens [0, fork_pos) are the parent's
  int64_t forced = 0, forced_pos = 0;  // tokens [forced_pos, forced_pos + forced) were forced, not sampled
  bool off_policy = false;             // not sampled by the policy: out of rollout statistics
};

// Terms the loss consumes beside the advantage and weight (RCSD's reverse_kl: a teacher's log-probs over the
// whole vocabulary at each completion token, [tokens x V]; the update adds Batch::reverse_kl_coef x KL(pi || it)).
struct LossTerms {
  std::vector<float> teacher_logq;
};

struct Trajectory {
  int64_t problem = 0;  // index into Batch::problems
  int64_t group = 0;    // samples of one prompt share a group (advantages are relative within it)
  int64_t member = 0;   // index within the group as sampled
  Lineage lineage;
  // The weights it was sampled with: the RL updates before them (-1: the trainer's current; [rl.async] samples older).
  int64_t version = -1;
  int64_t stratum = 0;  // batch-level reward scaling pools its std within a stratum (fair RL: the group's preference)
  std::vector<int32_t> prompt;
  std::vector<int32_t> tokens;        // the completion (a stop token included)
  std::vector<float> sample_logprob;  // under the sampling distribution
  std::vector<float> old_logprob;     // under the policy that sampled (the importance ratio's denominator)
  std::vector<float> entropy;         // policy entropy at each completion token
  std::vector<float> advantage;       // per completion token
  std::vector<float> weight;          // per completion token (1 by default; STARE reweights)
  std::vector<float> loss_mask;       // per completion token: 1 in the loss, 0 not
  LossTerms loss_terms;               // optional terms the loss consumes
  std::string text;                   // decoded completion
  double reward = 0;
  std::vector<double> rewards;       // reward vector (multi-objective), may be empty
  std::vector<double> reward_terms;  // each [[reward]] term's value (empty without [[reward]] terms)
  std::vector<std::pair<std::string, double>> reward_components;  // the terms' named components ("<term>.<name>")
  std::string reward_info;                                        // the terms' info texts (samples.jsonl)
  bool correct = false;
  rollout::FinishReason finish = rollout::FinishReason::length;
  std::vector<std::string> tags;   // free-form (methods mark edited copies, teacher prompts, ...)
  bool scored = false;             // reward set (the trainer scores the rest after after_rollout)
  std::vector<int64_t> act_slots;  // the rollout's kept activations per position (Completion::act_slots)
  // Multi-turn: tokens [first, first + count) an environment appended (observations): never in the loss.
  std::vector<std::pair<int64_t, int64_t>> appended;
  // f(k) for each token position k an environment appended (in `appended`, within the tokens).
  template <class F>
  void for_each_appended(F&& f) const {
    for (auto [at, n] : appended)
      for (int64_t k = at; k < at + n && k < static_cast<int64_t>(tokens.size()); ++k) f(static_cast<size_t>(k));
  }
};

// A rollout's completion as member c.member of group `problem` (a Batch::problems index): its tokens, log-probs,
// entropies, fork bookkeeping and kept activations moved out of `c`; `prompt` its request's, `text` its decoding.
inline Trajectory trajectory_from(rollout::Completion&& c, int64_t problem, std::vector<int32_t> prompt,
                                  std::string text) {
  Trajectory t;
  t.problem = problem;
  t.group = problem;
  t.member = c.member;
  t.lineage.parent = c.parent;
  t.lineage.fork_pos = c.fork_pos;
  t.lineage.forced = c.forced;
  t.lineage.forced_pos = c.forced_pos;
  t.prompt = std::move(prompt);
  t.text = std::move(text);
  t.tokens = std::move(c.tokens);
  t.sample_logprob = std::move(c.sample_logprob);
  t.old_logprob = std::move(c.policy_logprob);
  t.entropy = std::move(c.entropy);
  t.act_slots = std::move(c.act_slots);
  t.appended = std::move(c.appended);
  t.finish = c.finish;
  if (c.parent >= 0) t.tags.push_back("fork");
  return t;
}

struct Batch {
  int64_t step = 0;
  std::vector<tasks::Problem> problems;
  std::vector<Trajectory> traj;
  int64_t groups_dropped = 0;  // dynamic sampling: groups with equal rewards left out
  double reverse_kl_coef =
      0;  // weight of the per-token KL(pi || teacher) for trajectories with loss_terms.teacher_logq
};

}  // namespace temper::rl
