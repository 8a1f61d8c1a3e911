// The interface every RL method implements (STARE, DRE, ZPPO, REVES, GraphPO, ...): the trainer
// loop calls these hooks in order and never knows a method by name; the defaults do nothing.
// State a method keeps across steps is saved into and restored from the checkpoint as text.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "temper/rl/batch.h"

namespace temper::rl {

using Metrics = std::vector<std::pair<std::string, double>>;

class Method {
 public:
  virtual ~Method() = default;
  virtual std::string name() const = 0;
  // Per-token hook during the rollout (stop or fork sequences); null: none.
  virtual rollout::RolloutHook* rollout_hook() { return nullptr; }
  virtual void after_rollout(Batch&) {}  // add / replace / drop trajectories (before rewards)
  virtual void after_reward(Batch&) {}   // shaping, reward vectors -> scalar
  // Return true when the method set every trajectory's advantages itself (the estimator is skipped).
  virtual bool advantages(Batch&) { return false; }
  virtual void token_weights(Batch&) {}
  virtual void after_step(const Metrics&) {}  // controllers
  virtual void metrics(Metrics&) const {}     // what the method reports each step
  virtual std::string save_state() const { return {}; }
  virtual void load_state(const std::string&) {}
};

}  // namespace temper::rl
