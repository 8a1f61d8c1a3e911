// Generalised advantage estimation (Schulman et al. 2016, "High-dimensional continuous control using GAE"), as
// CleanRL's ppo_continuous_action.py computes it: delta_t = r_t + gamma V_{t+1} (1 - done_t) - V_t,
// A_t = delta_t + gamma lambda (1 - done_t) A_{t+1}, returns R_t = A_t + V_t. done_t = 1 when env i's episode
// ended with step t (no bootstrap across it); values[T] bootstraps the step after the rollout. Sums in double.
#pragma once

#include <cstdint>

namespace temper::control {

// rewards, dones [T, N]; values [T + 1, N]; adv, ret [T, N].
void gae(const float* rewards, const float* values, const float* dones, int64_t T, int64_t N, float gamma, float lambda,
         float* adv, float* ret);

}  // namespace temper::control
