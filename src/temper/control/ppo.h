// PPO (Schulman et al. 2017) as CleanRL's ppo_continuous_action.py runs it, on nn::Mlp and nn::AdamW: a Gaussian
// policy (gaussian_policy.h) and a value MLP over the same input row, one flat parameter vector [policy | value]
// and one AdamW with global gradient clipping over it; GAE (gae.h), then `epochs` passes over the rollout in
// `minibatches` shuffled minibatches (Philox permutation from (seed, iteration, epoch)) of the closed-form loss
// (ppo_loss.h). Action noise is Philox per (seed, iteration, step, env): a run's numbers do not depend on the
// thread count or on where it was interrupted. Leaves out: learning-rate annealing, observation normalisation.
#pragma once

#include <cstdint>
#include <vector>

#include "temper/control/gaussian_policy.h"
#include "temper/control/ppo_loss.h"
#include "temper/nn/mlp.h"

namespace temper::control {

struct PpoConfig {
  float lr = 3e-4f, gamma = 0.99f, lambda = 0.95f;
  int64_t epochs = 4, minibatches = 4;
  double max_grad_norm = 0.5;
  PpoLossConfig loss;
  std::vector<int64_t> value_hidden = {64, 64};
};

// One rollout: T steps of N envs. x [T, N, in], action [T, N, A], logp/reward/done [T, N], value [T + 1, N].
struct Rollout {
  int64_t T = 0, N = 0, in = 0, A = 0;
  std::vector<float> x, action, logp, reward, done, value;
  void resize(int64_t t, int64_t n, int64_t in_dim, int64_t a);
};

struct PpoStats {
  double loss = 0, policy = 0, value = 0, entropy = 0, approx_kl = 0, clip_frac = 0, grad_norm = 0;
};

class PpoAgent {
 public:
  PpoAgent(PolicySpec pi, PpoConfig c);
  const GaussianPolicy& policy() const { return pi_; }
  const nn::Mlp& value_net() const { return v_; }
  const PpoConfig& config() const { return c_; }
  void init(uint64_t seed);
  // [policy | value]; the optimiser's moments and step: what a checkpoint keeps.
  std::vector<float>& params() { return params_; }
  const std::vector<float>& params() const { return params_; }
  nn::AdamW& optimizer() { return opt_; }
  const nn::AdamW& optimizer() const { return opt_; }
  const float* policy_params() const { return params_.data(); }
  const float* value_params() const { return params_.data() + pi_.param_count(); }

  // Rows x [B, in]: the mean into `mean`, a sample mean + std * eps (eps Philox normal from (seed, stream,
  // row)) into `action` with its log-prob, and the value. deterministic: action = mean, logp of the mean.
  void act(const float* x, int64_t B, uint64_t seed, uint64_t stream, bool deterministic, float* action, float* logp,
           float* value) const;
  void values(const float* x, int64_t B, float* value) const;
  // GAE, then the epochs of minibatch updates. seed: the permutations' key (a function of the iteration).
  PpoStats update(const Rollout& r, uint64_t seed);
  // The loss of one minibatch (rows x [B, in], action [B, A], old_logp, adv, ret [B]) and its gradient, written
  // to grad() (overwritten); update() takes an AdamW step on it.
  PpoLossTerms minibatch_loss(const float* x, const float* action, const float* old_logp, const float* adv,
                              const float* ret, int64_t B);
  const std::vector<float>& grad() const { return grad_; }

 private:
  GaussianPolicy pi_;
  nn::Mlp v_;
  PpoConfig c_;
  std::vector<float> params_, grad_;
  nn::AdamW opt_;
};

}  // namespace temper::control
