// GraphPO, first cut (spec methods-llm-rl section 6): the graph advantage of rl/state_graph.h over each
// group's independently sampled rollouts. A rollout's steps end where the task's state extractor
// (Task::intermediate_states: the remaining numbers in countdown, the running value in arithmetic) reports
// a new state after a complete line; lines that change nothing join the next step; the rest of the
// completion (the answer) is the step to the leaf. Every token of a step gets the step's advantage;
// later copies of a shared physical edge leave the loss. A task without a state extractor gives one step
// per rollout: GRPO. Not here yet: step-wise expansion with a per-class budget, and embedding-based
// equivalence for free text (issue 8).
#pragma once

#include "temper/rl/method.h"
#include "temper/rl/state_graph.h"

namespace temper::rl {

// A completion's steps (text, state key, tokens) and, per token, its step.
std::vector<GraphStep> segment_steps(const tasks::Task& task, const tasks::Problem& p, const PromptCodec& codec,
                                     const std::vector<int32_t>& tokens, std::vector<int64_t>* step_of_token);

class GraphPo : public Method {
 public:
  explicit GraphPo(GraphConfig cfg) : cfg_(cfg) { cfg_.validate(); }
  std::string name() const override { return "graphpo"; }
  void attach(const MethodEnv& env) override { env_ = env; }
  bool advantages(Batch& b) override;
  void metrics(Metrics& m) const override;

 private:
  GraphConfig cfg_;
  MethodEnv env_;
  GraphStats sum_;
  int64_t groups_ = 0, rollouts_ = 0, steps_ = 0, tokens_ = 0;
  double adv_abs_ = 0, eff_abs_ = 0;
};

}  // namespace temper::rl
