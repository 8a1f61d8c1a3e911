// Exact log-densities of the Euler ODE sampler's outputs for low-dimensional models (the 2-D flows): the
// sampler is the map x_{k+1} = x_k + dt v(x_k, t_k), so by the change of variables
//   log q(x_N) = log N(x_0; 0, I) - sum_k log |det(I + dt J_k)|,  J_k = d v / d x at (x_k, t_k),
// with J_k from central differences (2 dim extra forwards per step). This is the density of what
// sample_ode draws, not of the continuous ODE. Used for KL(model || data) on 2-D data and for the
// discriminator-logit-vs-true-log-ratio check (DG-RL). Costly beyond a few dimensions: dim <= 8.
#pragma once

#include <cstdint>
#include <vector>

#include "temper/flow/sampler.h"

namespace temper::flow {

struct OdeSamples {
  std::vector<float> x;      // [B, dim]
  std::vector<double> logq;  // [B]
};

OdeSamples sample_ode_with_density(VelocityModel& m, const float* noise, const int32_t* y, int64_t B,
                                   const OdeConfig& c, double h = 1e-3);

}  // namespace temper::flow
