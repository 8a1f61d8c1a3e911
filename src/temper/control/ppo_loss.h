// The PPO minibatch loss (Schulman et al. 2017) for a Gaussian policy with a state-independent log-std, as
// CleanRL's ppo_continuous_action.py writes it: advantages normalised per minibatch ((A - mean) / (std + 1e-8),
// std unbiased as torch.std), pg = mean(max(-A r, -A clip(r, 1 - eps, 1 + eps))), value loss
// 0.5 mean((V - R)^2) (no value clipping), entropy of the diagonal Gaussian, loss = pg - ent_coef H + vf_coef v.
// Returns the loss terms and d(loss)/d(mean, log_std, value) in closed form; the networks chain them through
// their own backward. Sums in double.
#pragma once

#include <cstdint>

namespace temper::control {

struct PpoLossConfig {
  float clip = 0.2f, vf_coef = 0.5f, ent_coef = 0.f;
  bool normalize_adv = true;
};

struct PpoLossTerms {
  double loss = 0, policy = 0, value = 0, entropy = 0, approx_kl = 0, clip_frac = 0;
};

// log N(a; mean, exp(log_std)) summed over A dims.
double gaussian_logp(const float* mean, const float* log_std, const float* a, int64_t A);
// Entropy of the diagonal Gaussian (the same for every state).
double gaussian_entropy(const float* log_std, int64_t A);

// mean, action [B, A]; log_std [A]; old_logp, adv, value, ret [B]. Writes d_mean [B, A], d_value [B] and
// d_log_std [A] (overwritten, not accumulated).
PpoLossTerms ppo_loss(const PpoLossConfig& c, const float* mean, const float* log_std, const float* action,
                      const float* old_logp, const float* adv, const float* value, const float* ret, int64_t B,
                      int64_t A, float* d_mean, float* d_log_std, float* d_value);

}  // namespace temper::control
