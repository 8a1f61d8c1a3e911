// Scalarised Q-learning on the product (s, u): one value per (s, u, a) for the reward w . r; with counterfactual
// updates over every joint machine state this is QRM (Toro Icarte et al. 2018), on the visited one plain
// Q-learning on the cross-product. The baseline that returns one point: its front is the vector return of the
// greedy policy from (start, u0) (ties to the lowest action), rolled out in the deterministic world.
#pragma once

#include <vector>

#include "temper/tabular/learner.h"

namespace temper::tabular {

struct ScalarConfig {
  float gamma = 0.95f;
  float alpha = 1.0f;           // step size (1 is exact in a deterministic world)
  std::vector<double> weights;  // [D]
  int64_t max_steps = 100;      // the greedy rollout's length limit
};

class ScalarQ final : public Learner {
 public:
  ScalarQ(const ProductMdp& p, ScalarConfig c);
  void update(int64_t s, int64_t u, int64_t a) override;
  int64_t greedy(int64_t s, int64_t u, Rng& rng) const override;
  std::vector<double> front() const override;
  int64_t stored_points() const override { return static_cast<int64_t>(q_.size()); }
  void save(Snapshot& out) const override;
  void load(const Snapshot& in) override;
  float q(int64_t s, int64_t u, int64_t a) const { return q_[(s * p_.U + u) * p_.A() + a]; }

 private:
  ScalarConfig c_;
  std::vector<float> w_;  // [D]
  std::vector<float> q_;  // [S, U, A]
};

}  // namespace temper::tabular
