// The tabular training loop: epsilon-greedy episodes from (start, u0) on the product, each step updating the
// learner (for every joint machine state with the counterfactual methods), an episode cut at
// max_episode_steps; metric rows of the front estimate at (start, u0) (hypervolume, size; against the true front
// when known: hv_ratio, recovered, spurious, worst). The whole state (tables, RNG offset, position in the episode,
// counters) saves to a Snapshot and restores bitwise. Leaves out: the run directory (app/tabular_run).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "temper/core/rng.h"
#include "temper/tabular/config.h"
#include "temper/tabular/learner.h"

namespace temper::tabular {

using Metrics = std::vector<std::pair<std::string, double>>;

class TabularTrainer {
 public:
  // p must outlive the trainer. truth: the true front at (start, u0) ([n, D]), or empty when unknown.
  TabularTrainer(const ProductMdp& p, const TabularConfig& c, std::vector<double> truth = {});
  void step();  // one environment step
  int64_t steps() const { return steps_; }
  int64_t episodes() const { return episodes_; }
  std::vector<double> front() const { return learner_->front(); }
  Metrics evaluate() const;
  Snapshot save() const;
  void load(const Snapshot& s);
  const Learner& learner() const { return *learner_; }
  const std::vector<double>& truth() const { return truth_; }
  double truth_hypervolume() const { return truth_hv_; }

 private:
  const ProductMdp& p_;
  TabularConfig c_;
  std::unique_ptr<Learner> learner_;
  std::vector<double> truth_;
  double truth_hv_ = 0;
  Rng rng_;
  int64_t s_ = 0, u_ = 0, t_ = 0;  // position: world state, joint machine state, steps into the episode
  int64_t steps_ = 0, episodes_ = 0;
};

// Tolerance for matching a learned front to the true one (max-norm; float tables against double ground truth).
inline constexpr double kFrontTolerance = 1e-4;

}  // namespace temper::tabular
