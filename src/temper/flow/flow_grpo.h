// GRPO on flow models (Flow-GRPO, Liu et al. 2025) with the KL-regularised objective of DG-RL:
//   J(theta) = E_{tau ~ pi_theta}[ r(x_0) ] - beta KL(pi_theta || p_base)
// over the SDE sampler's paths tau = (x_1 = noise, ..., x_0) (sampler.h). Both are Markov chains with Gaussian
// steps of the same spread s_k, so the path KL is the expected sum of per-step KLs
//   KL_k(x_k) = |mean_theta(x_k) - mean_base(x_k)|^2 / (2 s_k^2) = c_k^2 |v_theta - v_base|^2 / (2 s_k^2),
// computed exactly at the visited states (c_k: the step's coefficient on v). The gradient used (on-policy, one
// step per batch, so the ratio is 1 and clipping has nothing to do):
//   grad J = E[ sum_k grad log pi(x_{k+1} | x_k) (A - beta (G_k - b_k)) - beta sum_k grad KL_k(x_k) ],
// A = r - the mean reward of the other group members (leave-one-out: unbiased, so beta keeps its meaning),
// G_k = sum_{j > k} KL_j the KL still to come after step k (the state x_j depends on the action at step k;
// dropping G_k, as Flow-GRPO's loss does, drops part of the KL's gradient), b_k its leave-one-out group mean.
// Groups: `group` consecutive rows share a class label. docs/METHODS.md derives why r = log p_data / p_base with
// beta = 1 makes the optimum p_data; tests/flow/test_flow_grpo.cpp checks this gradient against finite
// differences of J.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "temper/core/settings.h"
#include "temper/flow/sampler.h"

namespace temper::flow {

struct FlowGrpoConfig {
  int64_t group = 8;    // G: SDE samples per class label in a group
  int64_t groups = 16;  // groups per RL step
  std::string advantage =
      "loo";             // loo: r - mean of the others | std: Flow-GRPO's (r - mean) / std (changes beta's scale)
  bool kl_to_go = true;  // the later steps' KL in each step's advantage (false: Flow-GRPO's loss)
  void validate() const;
  void visit(KeyVisitor& v);
};

struct FlowGrpoStats {
  double reward = 0;     // mean reward
  double kl = 0;         // mean path KL (sum over steps) to the base
  double objective = 0;  // reward - beta kl
  double loss = 0;       // the surrogate's value
};

// Adds -grad J / B (a loss to minimise) to grad[policy.param_count()] for trajectories `tr` sampled from `policy`
// (sample_sde with the same SdeConfig, guidance-free) with rewards r [tr.B].
FlowGrpoStats flow_grpo_grad(VelocityModel& policy, VelocityModel& base, const SdeConfig& sde, const SdeTrajectory& tr,
                             const std::vector<double>& rewards, double beta, const FlowGrpoConfig& c, float* grad);

// Per-step KLs [steps, B] of `policy` to `base` at the trajectory's states (no gradient).
std::vector<double> path_step_kl(VelocityModel& policy, VelocityModel& base, const SdeConfig& sde,
                                 const SdeTrajectory& tr);

}  // namespace temper::flow
