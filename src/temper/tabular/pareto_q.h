// Pareto Q-learning on the product (s, u): per (s, u, a) a visit count, the running-average immediate reward
// vector Rbar and the non-dominated set ND of future return vectors; Qset(s,u,a) = {Rbar + gamma v : v in ND}
// ({Rbar} when ND is empty: after a terminal step). An update sets ND(s,u,a) = ND(U_a' Qset(s',u',a')), pruned by
// epsilon-dominance and a size cap. Actions are ranked by the hypervolume of their Qset. With counterfactual
// updates over every joint machine state this is PQLRM; on the visited state only, PQL on the cross-product.
// Follows Van Moffaert & Nowe (JMLR 2014) and, for the counterfactual updates, QRM (Toro Icarte et al. 2018).
#pragma once

#include <span>
#include <vector>

#include "temper/tabular/learner.h"

namespace temper::tabular {

struct ParetoConfig {
  float gamma = 0.95f;
  int64_t nd_cap = 64;            // <= 0: no cap
  double nd_epsilon = 0.0;        // <= 0: no epsilon-dominance pruning
  std::vector<double> reference;  // [D]: the hypervolume's reference point
};

class ParetoQ final : public Learner {
 public:
  ParetoQ(const ProductMdp& p, ParetoConfig c);
  void update(int64_t s, int64_t u, int64_t a) override;
  int64_t greedy(int64_t s, int64_t u, Rng& rng) const override;
  std::vector<double> front() const override;
  int64_t stored_points() const override;
  void save(Snapshot& out) const override;
  void load(const Snapshot& in) override;

  std::vector<float> qset(int64_t s, int64_t u, int64_t a) const;  // [n, D]
  std::vector<float> front_at(int64_t s, int64_t u) const;         // ND of the Qsets of every action
  double action_value(int64_t s, int64_t u, int64_t a) const;      // hypervolume of Qset(s,u,a)
  std::span<const float> rbar(int64_t s, int64_t u, int64_t a) const {
    return {&rbar_[index(s, u, a) * p_.D], static_cast<size_t>(p_.D)};
  }
  const std::vector<float>& nd(int64_t s, int64_t u, int64_t a) const { return nd_[index(s, u, a)]; }
  int64_t count(int64_t s, int64_t u, int64_t a) const { return counts_[index(s, u, a)]; }
  const ParetoConfig& config() const { return c_; }

 private:
  int64_t index(int64_t s, int64_t u, int64_t a) const { return (s * p_.U + u) * p_.A() + a; }
  ParetoConfig c_;
  std::vector<int64_t> counts_;         // [S, U, A]
  std::vector<float> rbar_;             // [S, U, A, D]
  std::vector<std::vector<float>> nd_;  // [S, U, A] sets of [n, D]
};

}  // namespace temper::tabular
