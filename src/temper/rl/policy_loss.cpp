// Clipped-surrogate policy loss; see policy_loss.h for the formulas. Each token is evaluated in double
// by one function (token_eval) that both the loss value and the classifier's coefficients use, so the
// gradient is the derivative of exactly the value reported.
#include "temper/rl/policy_loss.h"

#include <algorithm>
#include <cmath>

#include "temper/core/error.h"

namespace temper::rl {

void PolicyLossConfig::visit(KeyVisitor& v) {
  v("eps_low", eps_low, "lower clip of the importance ratio: 1 - eps_low");
  v("eps_high", eps_high, "upper clip of the ratio: 1 + eps_high (DAPO clip-higher: 0.28)");
  v("dual_clip", dual_clip, "dual-clip bound c on negative advantages (> 1 turns it on; verl uses 3)");
  v("kl_coef", kl_coef, "weight of the KL term to the frozen policy as RL started (0: no reference copy)");
  v("kl_estimator", kl_estimator, "KL estimator: k1, k2, k3 (GRPO's)", kKlEstimatorNames);
  v("ent_coef", ent_coef, "entropy bonus: the loss falls as entropy rises");
  v("loss_agg", agg,
    "how token losses are averaged: token_mean, seq_mean_token_mean (the GRPO paper), seq_mean_token_sum_norm "
    "(Dr.GRPO)",
    kLossAggNames);
  v("loss_max_len", max_len, "seq_mean_token_sum_norm's constant (default rl.max_new)");
  v("skip_no_gradient", skip_no_gradient,
    "a micro-batch whose loss has no gradient (every advantage 0, no KL or entropy term) skips its backward");
}

void PolicyLossConfig::validate() const {
  TEMPER_CHECK(eps_low >= 0 && eps_low < 1) << "policy loss eps_low must be in [0, 1), got " << eps_low;
  TEMPER_CHECK(eps_high >= 0 && std::isfinite(eps_high)) << "policy loss eps_high must be >= 0, got " << eps_high;
  TEMPER_CHECK(dual_clip == 0 || (dual_clip > 1 && std::isfinite(dual_clip)))
      << "policy loss dual_clip must be 0 (off) or > 1, got " << dual_clip;
  TEMPER_CHECK(std::isfinite(kl_coef) && kl_coef >= 0) << "policy loss kl_coef must be >= 0, got " << kl_coef;
  TEMPER_CHECK(std::isfinite(ent_coef)) << "policy loss ent_coef must be finite, got " << ent_coef;
  TEMPER_CHECK(max_len >= 0) << "policy loss max_len must be >= 0 (0: the batch's length), got " << max_len;
  TEMPER_CHECK(behaviour_cap == 0 || (behaviour_cap >= 1 && std::isfinite(behaviour_cap)))
      << "policy loss behaviour_cap must be 0 (off) or a finite number >= 1, got " << behaviour_cap;
}

void PolicyLossBatch::validate(const PolicyLossConfig& cfg) const {
  TEMPER_CHECK(N >= 0) << "policy loss batch rows must be >= 0, got " << N;
  TEMPER_CHECK(N == 0 || (advantage && scale)) << "policy loss batch needs advantage and scale arrays";
  TEMPER_CHECK(N == 0 || cfg.kl_coef == 0 || ref_logp)
      << "policy loss kl_coef = " << cfg.kl_coef << " needs ref_logp (the reference model's log-probs)";
}

LossNorm policy_loss_norm(const float* mask, int64_t B, int64_t T) {
  LossNorm n;
  n.seqs = B;
  for (int64_t i = 0; i < B * T; ++i) n.tokens += mask[i];
  return n;
}

void policy_loss_scale(const PolicyLossConfig& cfg, const float* mask, int64_t B, int64_t T, const LossNorm& norm,
                       float* scale) {
  cfg.validate();
  TEMPER_CHECK(B >= 0 && T >= 0) << "policy loss scale: bad shape [" << B << ", " << T << "]";
  double seqs = static_cast<double>(norm.seqs);
  for (int64_t b = 0; b < B; ++b) {
    const float* m = mask + b * T;
    double inv = 0;
    switch (cfg.agg) {
      case LossAgg::token_mean:
        inv = norm.tokens > 0 ? 1.0 / norm.tokens : 0.0;
        break;
      case LossAgg::seq_mean_token_mean: {
        double len = 0;
        for (int64_t t = 0; t < T; ++t) len += m[t];
        inv = seqs > 0 ? 1.0 / (seqs * std::max(1.0, len)) : 0.0;
        break;
      }
      case LossAgg::seq_mean_token_sum_norm: {
        double L = static_cast<double>(cfg.max_len > 0 ? cfg.max_len : T);
        inv = seqs > 0 && L > 0 ? 1.0 / (seqs * L) : 0.0;
        break;
      }
    }
    for (int64_t t = 0; t < T; ++t) scale[b * T + t] = static_cast<float>(m[t] * inv);
  }
}

void policy_loss_scale(const PolicyLossConfig& cfg, const float* mask, int64_t B, int64_t T, float* scale) {
  policy_loss_scale(cfg, mask, B, T, policy_loss_norm(mask, B, T), scale);
}

double policy_kl(KlEstimator est, double logp, double ref_logp) {
  double d = logp - ref_logp;
  switch (est) {
    case KlEstimator::k1:
      return d;
    case KlEstimator::k2:
      return 0.5 * d * d;
    case KlEstimator::k3:
      return std::expm1(-d) + d;  // exp(ref - logp) - (ref - logp) - 1, no cancellation
  }
  return 0;
}

double policy_kl_grad(KlEstimator est, double logp, double ref_logp) {
  double d = logp - ref_logp;
  switch (est) {
    case KlEstimator::k1:
      return 1.0;
    case KlEstimator::k2:
      return d;
    case KlEstimator::k3:
      return -std::expm1(-d);
  }
  return 0;
}

namespace {

struct TokenEval {
  double ratio = 1;
  double pg = 0;   // surrogate loss (before w and s)
  double dpg = 0;  // its d/dlogp
  bool low = false, high = false, dual = false;
};

// PPO's clipped surrogate, clip-higher and dual-clip. For A >= 0 the loss is -A min(r, r_c): flat where
// r > 1 + eps_high. For A < 0 it is -A max(r, r_c): flat where r < 1 - eps_low, and with dual-clip
// min(., -c A): flat where max(r, r_c) > c. Elsewhere d/dlogp = -A r (dr/dlogp = r).
TokenEval token_eval(const PolicyLossConfig& c, double lp, const float* old, int64_t n, double A) {
  TokenEval e;
  e.ratio = old ? std::exp(lp - static_cast<double>(old[n])) : 1.0;
  if (c.behaviour_cap > 0) {  // stale samples, one optimiser step: the ratio to the proximal (this forward) is 1
    e.high = e.ratio > c.behaviour_cap;
    e.pg = e.dpg = -std::min(e.ratio, c.behaviour_cap) * A;
    return e;
  }
  double r = e.ratio, lo = 1.0 - c.eps_low, hi = 1.0 + c.eps_high;
  double rc = std::clamp(r, lo, hi);
  if (A >= 0) {
    e.high = A > 0 && r > hi;
    e.pg = -A * std::min(r, rc);
    e.dpg = r > hi ? 0.0 : -A * r;
  } else {
    e.low = r < lo;
    double m = std::max(r, rc);
    e.pg = -A * m;
    e.dpg = e.low ? 0.0 : -A * r;
    if (c.dual_clip > 0 && m > c.dual_clip) {
      e.dual = true;
      e.pg = -A * c.dual_clip;
      e.dpg = 0.0;
    }
  }
  return e;
}

}  // namespace

PolicyLoss::PolicyLoss(const PolicyLossConfig& cfg, const PolicyLossBatch& batch) : cfg_(cfg), b_(batch) {
  cfg_.validate();
  b_.validate(cfg_);
  no_gradient_ = cfg_.skip_no_gradient && cfg_.kl_coef == 0 && cfg_.ent_coef == 0;
  const bool rkl = b_.rkl_logq && b_.rkl_coef != 0;
  for (int64_t n = 0; no_gradient_ && n < b_.N; ++n)
    no_gradient_ =
        b_.scale[n] == 0 || ((b_.advantage[n] == 0 || (b_.weight && b_.weight[n] == 0)) && !(rkl && b_.rkl_logq[n]));
}

bool PolicyLoss::reverse_kl_target(int64_t n, kernels::ReverseKlTarget* out) const {
  if (!b_.rkl_logq || !b_.rkl_logq[n] || b_.scale[n] == 0 || b_.rkl_coef == 0) return false;
  out->logq = b_.rkl_logq[n];
  out->coef = b_.rkl_coef * b_.scale[n];
  return true;
}

void PolicyLoss::reverse_kl_observed(int64_t n, float kl) const {
  if (b_.rkl_out) b_.rkl_out[n] = kl;
}

void PolicyLoss::coefs(int64_t n, float lp, float, float* g_lp, float* g_ent) const {
  double s = b_.scale[n];
  if (s == 0) {
    *g_lp = 0.f;
    *g_ent = 0.f;
    return;
  }
  double w = b_.weight ? static_cast<double>(b_.weight[n]) : 1.0;
  TokenEval e = token_eval(cfg_, lp, b_.old_logp, n, b_.advantage[n]);
  double g = w * e.dpg;
  if (cfg_.kl_coef != 0) g += cfg_.kl_coef * policy_kl_grad(cfg_.kl_estimator, lp, b_.ref_logp[n]);
  *g_lp = static_cast<float>(s * g);
  *g_ent = static_cast<float>(-s * cfg_.ent_coef);
}

void PolicyLossStats::merge(const PolicyLossStats& o) {
  loss += o.loss;
  pg_loss += o.pg_loss;
  kl_loss += o.kl_loss;
  entropy_loss += o.entropy_loss;
  tokens += o.tokens;
  clipped_low += o.clipped_low;
  clipped_high += o.clipped_high;
  dual_clipped += o.dual_clipped;
  ratio_sum += o.ratio_sum;
  kl_sum += o.kl_sum;
  entropy_sum += o.entropy_sum;
}

PolicyLossStats policy_loss_forward(const PolicyLossConfig& cfg, const PolicyLossBatch& b, const float* logp,
                                    const float* entropy) {
  cfg.validate();
  b.validate(cfg);
  TEMPER_CHECK(b.N == 0 || logp) << "policy_loss_forward needs the forward's logp";
  TEMPER_CHECK(b.N == 0 || cfg.ent_coef == 0 || entropy)
      << "policy loss ent_coef = " << cfg.ent_coef << " needs the forward's entropy";
  PolicyLossStats st;
  for (int64_t n = 0; n < b.N; ++n) {
    double s = b.scale[n];
    if (s == 0) continue;
    double lp = logp[n], w = b.weight ? static_cast<double>(b.weight[n]) : 1.0;
    TokenEval e = token_eval(cfg, lp, b.old_logp, n, b.advantage[n]);
    st.tokens += 1;
    st.clipped_low += e.low;
    st.clipped_high += e.high;
    st.dual_clipped += e.dual;
    st.ratio_sum += e.ratio;
    st.pg_loss += s * w * e.pg;
    if (b.ref_logp) {
      double kl = policy_kl(cfg.kl_estimator, lp, b.ref_logp[n]);
      st.kl_sum += kl;
      st.kl_loss += s * cfg.kl_coef * kl;
    }
    if (entropy) {
      st.entropy_sum += entropy[n];
      st.entropy_loss -= s * cfg.ent_coef * entropy[n];
    }
  }
  st.loss = st.pg_loss + st.kl_loss + st.entropy_loss;
  return st;
}

}  // namespace temper::rl
