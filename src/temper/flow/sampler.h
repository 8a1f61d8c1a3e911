// Samplers over any VelocityModel, in the convention of flow_matching.h: x_t = (1 - t) x_0 + t eps (t = 0
// data, t = 1 noise), v = eps - x_0; sampling runs from t = 1 to t = 0 on the grid t_k = 1 - k / steps.
//  - Euler ODE: x_{k+1} = x_k + v(x_k, t_k) (t_{k+1} - t_k).
//  - SDE (Flow-GRPO, Liu et al. 2025, eq. 9-12): the reverse SDE with the same marginals, discretised by
//    Euler-Maruyama, so each step is a Gaussian with an exact log-prob (what policy-gradient RL needs):
//      x_{k+1} ~ N(mean_k, s_k^2 I),  mean_k = x (1 + sig^2 dt / (2t)) + v (1 + sig^2 (1 - t) / (2t)) dt,
//      s_k = sig sqrt(-dt),  sig = a sqrt(t / (1 - t)) (t = 1 replaced by t_1, as Flow-GRPO), dt = t_{k+1} - t_k < 0.
// Classifier-free guidance: v = v(x, null) + w (v(x, y) - v(x, null)) (w = 1: the conditional model alone,
// one forward); the null label is classes().
#pragma once

#include <cstdint>
#include <vector>

#include "temper/flow/velocity_model.h"

namespace temper::flow {

struct OdeConfig {
  int64_t steps = 50;
  double cfg = 1.0;  // guidance scale w
};

struct SdeConfig {
  int64_t steps = 20;
  double noise = 0.7;  // a: Flow-GRPO's noise level
  double cfg = 1.0;
};

// One SDE step k of `steps`: mean = cx x + cv v, standard deviation s.
struct SdeStep {
  double t = 1, t_next = 0, cx = 1, cv = 0, s = 0;
};
SdeStep sde_step(const SdeConfig& c, int64_t k);

// The guided velocity v [B, dim] at x [B, dim], one time t for all rows (w = 1: one forward).
void guided_velocity(VelocityModel& m, const float* x, double t, const int32_t* y, int64_t B, double w, float* v);

// Standard normal noise [B, dim]: row i from Philox stream (seed, i).
std::vector<float> initial_noise(int64_t B, int64_t dim, uint64_t seed);

// x_0 [B, dim] from x_1 = noise [B, dim].
std::vector<float> sample_ode(VelocityModel& m, const float* noise, const int32_t* y, int64_t B, const OdeConfig& c);

struct SdeTrajectory {
  int64_t B = 0, dim = 0, steps = 0;
  std::vector<float> x;     // [steps + 1, B, dim]: x[0] the noise at t = 1, x[steps] the sample at t = 0
  std::vector<int32_t> y;   // [B]
  std::vector<float> logp;  // [steps, B]: log N(x_{k+1}; mean_k, s_k^2 I) under the sampling model
  const float* at(int64_t k) const { return x.data() + k * B * dim; }
  const float* sample() const { return at(steps); }
};
// Row i's noise (its x_1, then each step's) from Philox stream (seed, i): a row's draws do not depend on B.
SdeTrajectory sample_sde(VelocityModel& m, const int32_t* y, int64_t B, const SdeConfig& c, uint64_t seed);
// The same with row i's draws from Philox stream (key[i], stream[i]): a path named by the caller, the same
// wherever it is generated (Spotlight: a candidate seed in an explorer's chunk and in the trainer's group).
SdeTrajectory sample_sde_rows(VelocityModel& m, const int32_t* y, const uint64_t* key, const uint64_t* stream,
                              int64_t B, const SdeConfig& c);

// log N(x; mean, s^2 I) over dim elements.
double gaussian_log_prob(const float* x, const float* mean, int64_t dim, double s);

}  // namespace temper::flow
