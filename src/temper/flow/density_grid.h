// How far generated 2-D samples are from a known density: both put on a cells x cells grid over
// [-half, half]^2 (the true cell masses from the density at the cell centres, renormalised over the grid;
// the samples as a histogram), then total variation 0.5 sum |p - q| and KL(p_true || q) with q smoothed
// by half a count per cell (the samples' likelihood under the true density: flow/evaluate's nll).
#pragma once

#include <cstdint>

#include "temper/flow/toy2d.h"

namespace temper::flow {

struct GridDistance {
  double tv = 0, kl = 0;
};

// x [n, 2]; y < 0: against the marginal, else against p(x | y).
GridDistance density_distance(const Toy2d& truth, const float* x, int64_t n, int32_t y = -1, int64_t cells = 64);
double grid_half_width(const Toy2dConfig& c);  // radius + 4 std: the grid's half width

}  // namespace temper::flow
