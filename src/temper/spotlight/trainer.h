// Spotlight's trainer for flow models (spec methods-other section 3): GRPO on SDE paths (flow/flow_grpo.h, the
// KL-regularised objective of DG-RL) whose groups' noise seeds were chosen by explorers on older weights.
// Step s (from 1; the trainer holds version V = s - 1, the parameters after V updates):
//   1. the groups of step s: each group's scored candidates (explored during step s - 1) -> its G seeds of
//      maximal spread (planner.h); a group without G scored candidates takes its first G (random seeds:
//      exploration missing never blocks); the bandit observes each explored group;
//   2. the explorers get version max(V - max_staleness, oldest held) from the weight store (memory), and the
//      requests for step s + 1 go on the queue (the planner's order, cut at the budget: measured step time x
//      explorers / seconds per request, or planner.budget);
//   3. the trainer regenerates the groups' seeds with version V (the gradient stays on-policy; only the seed
//      choice is stale), computes the rewards, the GRPO gradient and one AdamW step -> version V + 1;
//   4. with barrier, waits until step s + 1's requests are all answered (dropped ones aside).
// With explorers = 0 it is synchronous GRPO on random seeds (the baseline). The explorers' processes are
// explorer_pool.h's; what they run is the caller's command (temper flow explore).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "temper/flow/dg_rl.h"
#include "temper/flow/evaluate.h"
#include "temper/nn/mlp.h"
#include "temper/spotlight/explorer_pool.h"
#include "temper/spotlight/flow_scorer.h"
#include "temper/spotlight/planner.h"
#include "temper/spotlight/schedule.h"
#include "temper/spotlight/spotlight_config.h"
#include "temper/spotlight/weight_store.h"
#include "temper/spotlight/work_queue.h"

namespace temper::spotlight {

// A step's timeline (queue-clock seconds) and the results its groups were chosen from.
struct StepTrace {
  int64_t step = 0, version = 0;  // the version the trainer held during the step
  double begin = 0, train_begin = 0, train_end = 0, end = 0;
  std::vector<ExploreResult> results;
};

class SpotlightTrainer {
 public:
  using LabelFn = std::function<std::vector<int32_t>(int64_t step)>;  // the step's groups' class labels
  // rl: beta, lr, weight_decay, max_grad_norm, seed, sde and grpo.groups are used; grpo.group must equal
  // sc.planner.group. policy and base outlive this.
  SpotlightTrainer(flow::VelocityModel& policy, flow::VelocityModel& base, RewardFn reward, LabelFn labels,
                   flow::DgRlConfig rl, SpotlightConfig sc, int64_t classes);
  ~SpotlightTrainer();
  // Starts sc.explorers explorer processes running `cmd` (after restore(), when resuming).
  void start_explorers(ExplorerCommand cmd);
  flow::Metrics step(int64_t s);
  const std::vector<GroupPlan>& last_groups() const { return groups_; }
  const std::vector<StepTrace>& trace() const { return trace_; }
  // Stops the explorers (their counters stay readable).
  void finish();

  nn::AdamW& opt() { return opt_; }
  WorkQueue& queue() { return queue_; }
  ExplorerPool* pool() { return pool_.get(); }
  Planner& planner() { return planner_; }
  WeightStore& store() { return store_; }

  // Checkpoint state besides the policy: AdamW's moments, the older weight versions held ("spotlight.v<N>"),
  // and (JSON) AdamW's step, the bandit, the committed results of the next step.
  std::vector<std::pair<std::string, std::vector<float>>> state_tensors() const;
  nlohmann::json state() const;
  using TensorLookup = std::function<const std::vector<float>&(const std::string&)>;
  void restore(const TensorLookup& tensor, const nlohmann::json& state);

 private:
  std::vector<GroupPlan> choose(int64_t s, const std::vector<int32_t>& labels, std::vector<ExploreResult>& results);
  void explore_next(int64_t s);
  int64_t budget() const;
  flow::Metrics train();  // regenerates groups_ with the current weights; one AdamW step
  void add_explore_metrics(const std::vector<ExploreResult>& results, flow::Metrics& m) const;

  flow::VelocityModel& policy_;
  flow::VelocityModel& base_;
  RewardFn reward_;
  LabelFn labels_;
  flow::DgRlConfig rl_;
  SpotlightConfig sc_;
  nn::AdamW opt_;
  std::vector<float> grad_;
  WeightStore store_;
  WorkQueue queue_;
  Planner planner_;
  std::unique_ptr<ExplorerPool> pool_;
  std::map<int64_t, std::vector<GroupPlan>> replay_;
  std::vector<GroupPlan> groups_;
  std::vector<StepTrace> trace_;
  double step_s_ema_ = 0, request_s_ema_ = 0;
};

}  // namespace temper::spotlight
