#include "temper/control/ppo_loss.h"

#include <cmath>
#include <vector>

#include "temper/core/error.h"

namespace temper::control {

namespace {
constexpr double kHalfLog2Pi = 0.91893853320467274178;
}

double gaussian_logp(const float* mean, const float* log_std, const float* a, int64_t A) {
  double s = 0;
  for (int64_t j = 0; j < A; ++j) {
    double z = (double(a[j]) - mean[j]) * std::exp(-double(log_std[j]));
    s += -0.5 * z * z - log_std[j] - kHalfLog2Pi;
  }
  return s;
}

double gaussian_entropy(const float* log_std, int64_t A) {
  double s = 0;
  for (int64_t j = 0; j < A; ++j) s += 0.5 + kHalfLog2Pi + log_std[j];
  return s;
}

PpoLossTerms ppo_loss(const PpoLossConfig& c, const float* mean, const float* log_std, const float* action,
                      const float* old_logp, const float* adv, const float* value, const float* ret, int64_t B,
                      int64_t A, float* d_mean, float* d_log_std, float* d_value) {
  TEMPER_CHECK(B >= 2 || !c.normalize_adv) << "ppo loss: normalising advantages needs a minibatch of >= 2, got " << B;
  double am = 0, as = 0;
  if (c.normalize_adv) {
    for (int64_t i = 0; i < B; ++i) am += adv[i];
    am /= double(B);
    for (int64_t i = 0; i < B; ++i) as += (adv[i] - am) * (adv[i] - am);
    as = std::sqrt(as / double(B - 1)) + 1e-8;
  }
  std::vector<double> inv_var(static_cast<size_t>(A)), dls(static_cast<size_t>(A), 0.0);
  for (int64_t j = 0; j < A; ++j) inv_var[j] = std::exp(-2.0 * log_std[j]);
  PpoLossTerms t;
  const double inv_b = 1.0 / double(B), lo = 1.0 - c.clip, hi = 1.0 + c.clip;
  for (int64_t i = 0; i < B; ++i) {
    double a_i = c.normalize_adv ? (adv[i] - am) / as : double(adv[i]);
    double logr = gaussian_logp(mean + i * A, log_std, action + i * A, A) - old_logp[i], r = std::exp(logr);
    double rc = r < lo ? lo : (r > hi ? hi : r);
    double s1 = -a_i * r, s2 = -a_i * rc;
    t.policy += (s1 > s2 ? s1 : s2) * inv_b;
    // d pg / d logp: through the unclipped term unless the clipped one is larger (then r is outside the range
    // and clip'(r) = 0). On a tie both give -a r (torch.max splits the gradient evenly between them).
    double g = s2 > s1 ? 0.0 : -a_i * r * inv_b;
    t.approx_kl += ((r - 1) - logr) * inv_b;
    t.clip_frac += (std::fabs(r - 1) > c.clip ? 1.0 : 0.0) * inv_b;
    for (int64_t j = 0; j < A; ++j) {
      double diff = double(action[i * A + j]) - mean[i * A + j];
      d_mean[i * A + j] = static_cast<float>(g * diff * inv_var[j]);
      dls[j] += g * (diff * diff * inv_var[j] - 1.0);
    }
    double dv = double(value[i]) - ret[i];
    t.value += 0.5 * dv * dv * inv_b;
    d_value[i] = static_cast<float>(c.vf_coef * dv * inv_b);
  }
  t.entropy = gaussian_entropy(log_std, A);
  for (int64_t j = 0; j < A; ++j) d_log_std[j] = static_cast<float>(dls[j] - c.ent_coef);
  t.loss = t.policy - c.ent_coef * t.entropy + c.vf_coef * t.value;
  return t;
}

}  // namespace temper::control
