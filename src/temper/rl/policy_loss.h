// The policy-gradient loss of the GRPO family, per token and aggregated over a whole batch that the
// trainer runs in micro-batches: PPO's clipped surrogate (Schulman et al. 2017) with DAPO's decoupled
// eps_low/eps_high (Yu et al. 2025), dual-clip for A < 0 (Ye et al. 2020, as verl's clip_ratio_c),
// per-token weights (STARE), KL to a frozen reference, an entropy bonus and three aggregations.
// Agrees with TRL 0.19.1 GRPOTrainer (golden test). Leaves out: value losses (no critic),
// sequence-level ratios (GSPO).
#pragma once

#include <cstdint>

#include "temper/core/settings.h"
#include "temper/kernels/classifier.h"

namespace temper::rl {

// The token-mean / seq-mean-token-mean / Dr.GRPO (Liu et al. 2025) aggregations.
// How per-token losses l[b,t] (mask m[b,t], B sequences of the WHOLE batch) become one number:
enum class LossAgg {
  token_mean,               // sum_{b,t} m l / sum_{b,t} m              (TRL "bnpo", verl "token-mean", DAPO)
  seq_mean_token_mean,      // (1/B) sum_b sum_t m l / max(1, sum_t m)  (TRL "grpo", the GRPO paper)
  seq_mean_token_sum_norm,  // sum_{b,t} m l / (B * max_len)           (TRL "dr_grpo", Dr.GRPO)
};

inline constexpr EnumNames<LossAgg, 3> kLossAggNames{{{LossAgg::token_mean, "token_mean"},
                                                      {LossAgg::seq_mean_token_mean, "seq_mean_token_mean"},
                                                      {LossAgg::seq_mean_token_sum_norm, "seq_mean_token_sum_norm"}}};

// KL to the frozen reference: Schulman's k1/k2/k3 estimators ("Approximating KL Divergence", 2020).
enum class KlEstimator {
  k1,  // d = logp - ref_logp:         KL = d,                 dKL/dlogp = 1
  k2,  //                              KL = d^2 / 2,           dKL/dlogp = d
  k3,  //                              KL = exp(-d) + d - 1,   dKL/dlogp = 1 - exp(-d)  (GRPO/TRL's choice)
};

inline constexpr EnumNames<KlEstimator, 3> kKlEstimatorNames{
    {{KlEstimator::k1, "k1"}, {KlEstimator::k2, "k2"}, {KlEstimator::k3, "k3"}}};

// Per token t with ratio r = exp(logp - old_logp), advantage A, weight w, entropy H, scale s:
//   pg  = -min(r A, clip(r, 1 - eps_low, 1 + eps_high) A)
//   pg  = min(pg, -c A)            when dual_clip = c > 0 and A < 0
//   l   = s * (w * pg + kl_coef * KL(logp, ref_logp) - ent_coef * H)
// and the batch loss is sum_t l (the aggregation lives in s, see policy_loss_scale).
struct PolicyLossConfig {
  double eps_low = 0.2;
  double eps_high = 0.2;  // DAPO clip-higher: 0.28
  double dual_clip = 0;   // c > 1 turns dual-clip on (verl default 3); with c >= 1 + eps_high it equals TRL's `delta`
  double kl_coef = 0;     // beta
  KlEstimator kl_estimator = KlEstimator::k3;
  double ent_coef = 0;    // entropy bonus: the loss falls as entropy rises
  LossAgg agg = LossAgg::token_mean;
  int64_t max_len = 0;    // seq_mean_token_sum_norm's constant (TRL max_completion_length); 0: the batch's T
  // A batch whose loss has no gradient (PolicyLoss::no_gradient) computes log-probs and entropies only; false runs
  // its backward anyway (all zeros: for benchmarks of equal work).
  bool skip_no_gradient = true;
  // > 0: old_logp holds the log-probs of the behaviour policy that sampled (stale weights: [rl.async]) and the
  // proximal policy is the forward's own, as in decoupled PPO (Hilton et al. 2022, AReaL) with one optimiser step
  // per batch: the PPO ratio pi / sg(pi) is 1 (nothing to clip) and the surrogate is weighted by the truncated
  // importance weight rho = min(exp(logp - old_logp), behaviour_cap), held constant (TIS, Yao et al. 2025):
  //   pg = -rho A,  d pg / d logp = -rho A.
  // The statistics then describe rho: ratio_mean is the mean untruncated exp(logp - old_logp) and clipped_high
  // counts the tokens whose rho was truncated. Set by the trainer from rl.async.tis_cap, not a recipe key.
  double behaviour_cap = 0;
  void validate() const;
  void visit(KeyVisitor& v);  // in [rl]
};

// The whole batch's normalisers. Data-parallel ranks add tokens and seqs across ranks before scaling.
struct LossNorm {
  double tokens = 0;  // sum of the mask
  int64_t seqs = 0;   // sequences (an empty one still counts, as in TRL)
};

LossNorm policy_loss_norm(const float* mask, int64_t B, int64_t T);  // mask [B, T]

// scale [B, T] = the weight of each token's loss in the batch loss (0 where mask is 0):
// token_mean m / tokens; seq_mean_token_mean m / (seqs * max(1, sum_t m[b])); sum_norm m / (seqs * L).
void policy_loss_scale(const PolicyLossConfig& cfg, const float* mask, int64_t B, int64_t T, const LossNorm& norm,
                       float* scale);
// The same with this batch's own normalisers (single process).
void policy_loss_scale(const PolicyLossConfig& cfg, const float* mask, int64_t B, int64_t T, float* scale);

// One micro-batch: N rows (token positions), all arrays [N], non-owning.
struct PolicyLossBatch {
  const float* old_logp = nullptr;   // log pi_old of the row's token; null: on-policy (r = 1, old = logp detached)
  const float* ref_logp = nullptr;   // log pi_ref; required when kl_coef != 0, else optional (KL statistics)
  const float* advantage = nullptr;  // A per token (expand_to_tokens)
  const float* weight = nullptr;     // w on the surrogate; null: 1
  const float* scale = nullptr;      // the micro-batch's slice of policy_loss_scale; 0 = row not in the loss
  int64_t N = 0;
  // Full-vocabulary distillation (RCSD's reverse-KL mode): row n's teacher log-probabilities over the whole
  // vocabulary (null rows: none); the row's loss gains scale * rkl_coef * KL(pi || teacher), and its KL is
  // written to rkl_out[n] when given.
  const float* const* rkl_logq = nullptr;
  float rkl_coef = 0.f;
  float* rkl_out = nullptr;
  void validate(const PolicyLossConfig& cfg) const;
};

double policy_kl(KlEstimator est, double logp, double ref_logp);       // KL estimate of one token
double policy_kl_grad(KlEstimator est, double logp, double ref_logp);  // its d/dlogp

// The loss as the fused classifier wants it: coefs(n, logp, H) = (dL/dlogp, dL/dH) of row n. Stateless
// after construction (const reads only), so the classifier may call it from many threads.
class PolicyLoss : public kernels::ClassifierLoss {
 public:
  PolicyLoss(const PolicyLossConfig& cfg, const PolicyLossBatch& batch);
  void coefs(int64_t n, float lp, float H, float* g_lp, float* g_ent) const override;
  bool reverse_kl_target(int64_t n, kernels::ReverseKlTarget* out) const override;
  void reverse_kl_observed(int64_t n, float kl) const override;
  // No KL, entropy or reverse-KL term, and every row in the loss has advantage 0 or weight 0 (a GRPO group
  // whose rewards are all equal): the surrogate's gradient is exactly zero, so the backward is skipped.
  bool no_gradient() const override { return no_gradient_; }

 private:
  PolicyLossConfig cfg_;
  PolicyLossBatch b_;
  bool no_gradient_ = false;
};

// Sums over the rows in the loss (scale != 0). Add the micro-batches' stats with merge; loss then is
// the batch loss. Clip counts follow TRL: low = A < 0 and r < 1 - eps_low, high = A > 0 and
// r > 1 + eps_high; dual = A < 0 and r > c (verl's pg_clipfrac_lower).
struct PolicyLossStats {
  double loss = 0;          // sum of l: pg_loss + kl_loss + entropy_loss
  double pg_loss = 0;       // sum s * w * pg
  double kl_loss = 0;       // sum s * kl_coef * KL
  double entropy_loss = 0;  // sum -s * ent_coef * H
  int64_t tokens = 0;
  int64_t clipped_low = 0, clipped_high = 0, dual_clipped = 0;
  double ratio_sum = 0, kl_sum = 0, entropy_sum = 0;  // unscaled, unweighted sums (KL: when ref_logp is given)
  void merge(const PolicyLossStats& o);
  double clip_frac_low() const { return frac(clipped_low); }
  double clip_frac_high() const { return frac(clipped_high); }
  double clip_frac() const { return frac(clipped_low + clipped_high); }
  double dual_clip_frac() const { return frac(dual_clipped); }
  double mean_ratio() const { return tokens ? ratio_sum / static_cast<double>(tokens) : 0.0; }
  double mean_kl() const { return tokens ? kl_sum / static_cast<double>(tokens) : 0.0; }
  double mean_entropy() const { return tokens ? entropy_sum / static_cast<double>(tokens) : 0.0; }

 private:
  double frac(int64_t k) const { return tokens ? static_cast<double>(k) / static_cast<double>(tokens) : 0.0; }
};

// The loss and statistics of a micro-batch from the logp [N] (and entropy [N]; may be null when
// ent_coef == 0) that the forward produced.
PolicyLossStats policy_loss_forward(const PolicyLossConfig& cfg, const PolicyLossBatch& batch, const float* logp,
                                    const float* entropy);

}  // namespace temper::rl
