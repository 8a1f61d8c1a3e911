// Policy extraction from Pareto Q-learning by tracking (Van Moffaert & Nowe 2014): to realise a chosen vector V
// of the front at (start, u0), take the action whose Qset holds the vector nearest V (max-norm), continue from
// the next state with the ND element v it came from (V = Rbar + gamma v, so v = (V - Rbar) / gamma, taken from
// the table rather than recomputed), until the episode ends. Exact in a deterministic world once the sets have
// converged. Leaves out: stochastic worlds (tracking needs the successor to be the one the set was learned from).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "temper/tabular/pareto_q.h"

namespace temper::tabular {

struct TrackResult {
  std::vector<double> realised;  // [D]: sum_t gamma^t r_t of the rollout
  std::vector<int64_t> actions;
  bool terminated = false;  // reached a terminal joint state within max_steps
  double worst_gap = 0;     // the largest distance between a tracked vector and the nearest Qset element on the way
};

TrackResult track(const ParetoQ& q, const ProductMdp& p, std::span<const float> target, int64_t max_steps);

}  // namespace temper::tabular
