// Flow-matching training (Lipman et al. 2023; the SiT linear interpolant / rectified flow, Liu et al. 2023),
// velocity prediction. Convention, shared by the samplers (sampler.h):
//   x_t = (1 - t) x_0 + t eps,  t in [0, 1],  x_0 data (t = 0),  eps ~ N(0, I) noise (t = 1),
//   target v = d x_t / dt = eps - x_0,  loss = sum_i w_i mean_j (v_theta(x_t, t, y)_ij - v_ij)^2 / sum_i w_i
// (w = 1: torch's F.mse_loss). Classifier-free guidance training drops each label to the null label with
// probability p_uncond. Sampling runs from t = 1 to t = 0.
#pragma once

#include <cstdint>
#include <vector>

#include "temper/flow/velocity_model.h"

namespace temper::flow {

struct FmBatch {
  int64_t B = 0;
  const float* x0 = nullptr;   // [B, dim] data
  const int32_t* y = nullptr;  // [B] labels (null label allowed)
  const float* t = nullptr;    // [B]
  const float* eps = nullptr;  // [B, dim]
  const float* w = nullptr;    // [B] sample weights (null: all 1)
};

// The loss of one batch; adds d loss / d params to grad[param_count()].
double fm_loss_grad(VelocityModel& m, const FmBatch& b, float* grad);

// The random part of a batch: t ~ U(0, 1), eps ~ N(0, I), labels dropped to the null label with probability
// p_uncond; row i from Philox stream (seed, i), so a row's draws do not depend on B.
struct FmDraw {
  std::vector<float> t, eps;
  std::vector<int32_t> y;
};
FmDraw fm_draw(int64_t B, int64_t dim, const int32_t* y, int64_t classes, double p_uncond, uint64_t seed);

}  // namespace temper::flow
