#include "temper/control/ppo.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "temper/control/gae.h"
#include "temper/control/mlp_spec.h"
#include "temper/core/error.h"
#include "temper/core/rng.h"

namespace temper::control {

void Rollout::resize(int64_t t, int64_t n, int64_t in_dim, int64_t a) {
  T = t, N = n, in = in_dim, A = a;
  x.assign(static_cast<size_t>(t * n * in_dim), 0.f);
  action.assign(static_cast<size_t>(t * n * a), 0.f);
  logp.assign(static_cast<size_t>(t * n), 0.f);
  reward.assign(static_cast<size_t>(t * n), 0.f);
  done.assign(static_cast<size_t>(t * n), 0.f);
  value.assign(static_cast<size_t>((t + 1) * n), 0.f);
}

PpoAgent::PpoAgent(PolicySpec pi, PpoConfig c)
    : pi_(std::move(pi)),
      v_(mlp_spec(pi_.in(), c.value_hidden, 1)),
      c_(std::move(c)),
      params_(static_cast<size_t>(pi_.param_count() + v_.param_count()), 0.f),
      grad_(params_.size(), 0.f),
      opt_(static_cast<int64_t>(params_.size()), kernels::AdamWConfig{0.9f, 0.999f, 1e-5f, 0.f}) {
  TEMPER_CHECK(c_.epochs >= 1 && c_.minibatches >= 1)
      << "ppo: epochs " << c_.epochs << " and minibatches " << c_.minibatches << " must be >= 1";
}

void PpoAgent::init(uint64_t seed) {
  pi_.init(params_.data(), mix_seed(seed, 11));
  v_.init(params_.data() + pi_.param_count(), mix_seed(seed, 12));
}

void PpoAgent::act(const float* x, int64_t B, uint64_t seed, uint64_t stream, bool deterministic, float* action,
                   float* logp, float* value) const {
  const int64_t A = pi_.act_dim();
  std::vector<float> mean(static_cast<size_t>(B * A));
  pi_.mean(policy_params(), x, B, mean.data());
  const float* log_std = policy_params() + pi_.log_std_offset();
  for (int64_t r = 0; r < B; ++r) {
    Rng rng(seed, mix_seed(stream, static_cast<uint64_t>(r)));
    for (int64_t j = 0; j < A; ++j) {
      float eps = deterministic ? 0.f : rng.normal();
      action[r * A + j] = mean[r * A + j] + std::exp(log_std[j]) * eps;
    }
    if (logp) logp[r] = static_cast<float>(gaussian_logp(&mean[r * A], log_std, &action[r * A], A));
  }
  if (value) values(x, B, value);
}

void PpoAgent::values(const float* x, int64_t B, float* value) const {
  v_.forward(value_params(), x, B, value);
}

PpoStats PpoAgent::update(const Rollout& r, uint64_t seed) {
  const int64_t n = r.T * r.N, A = r.A, in = r.in;
  TEMPER_CHECK(in == pi_.in() && A == pi_.act_dim())
      << "ppo: rollout rows of " << in << " inputs and " << A << " actions for a policy of " << pi_.in() << " and "
      << pi_.act_dim();
  std::vector<float> adv(static_cast<size_t>(n)), ret(static_cast<size_t>(n));
  gae(r.reward.data(), r.value.data(), r.done.data(), r.T, r.N, c_.gamma, c_.lambda, adv.data(), ret.data());
  const int64_t mb = n / c_.minibatches;
  TEMPER_CHECK(mb >= 2) << "ppo: " << n << " samples in " << c_.minibatches << " minibatches: fewer than 2 each";
  std::vector<int64_t> idx(static_cast<size_t>(n));
  std::vector<float> x(mb * in), act(mb * A), old(mb), a(mb), rt(mb);
  PpoStats s;
  int64_t count = 0;
  for (int64_t e = 0; e < c_.epochs; ++e) {
    std::iota(idx.begin(), idx.end(), 0);
    Rng rng(seed, static_cast<uint64_t>(e));
    for (int64_t i = n - 1; i > 0; --i) std::swap(idx[i], idx[rng.next_u32() % static_cast<uint32_t>(i + 1)]);
    for (int64_t b = 0; b < c_.minibatches; ++b) {
      for (int64_t k = 0; k < mb; ++k) {
        int64_t j = idx[b * mb + k];
        std::copy(&r.x[j * in], &r.x[(j + 1) * in], &x[k * in]);
        std::copy(&r.action[j * A], &r.action[(j + 1) * A], &act[k * A]);
        old[k] = r.logp[j], a[k] = adv[j], rt[k] = ret[j];
      }
      PpoLossTerms t = minibatch_loss(x.data(), act.data(), old.data(), a.data(), rt.data(), mb);
      double gn = opt_.update(params_.data(), grad_.data(), c_.lr, c_.max_grad_norm);
      s.loss += t.loss, s.policy += t.policy, s.value += t.value, s.entropy += t.entropy;
      s.approx_kl += t.approx_kl, s.clip_frac += t.clip_frac, s.grad_norm += gn;
      ++count;
    }
  }
  for (double* f : {&s.loss, &s.policy, &s.value, &s.entropy, &s.approx_kl, &s.clip_frac, &s.grad_norm})
    *f /= double(count);
  return s;
}

PpoLossTerms PpoAgent::minibatch_loss(const float* x, const float* action, const float* old_logp, const float* adv,
                                      const float* ret, int64_t B) {
  const int64_t A = pi_.act_dim();
  std::vector<float> mean(B * A), val(B), dm(B * A), dv(B), dls(A);
  GaussianPolicy::Tape pt;
  nn::Mlp::Tape vt;
  pi_.mean(policy_params(), x, B, mean.data(), &pt);
  v_.forward(value_params(), x, B, val.data(), &vt);
  PpoLossTerms t = ppo_loss(c_.loss, mean.data(), policy_params() + pi_.log_std_offset(), action, old_logp, adv,
                            val.data(), ret, B, A, dm.data(), dls.data(), dv.data());
  std::fill(grad_.begin(), grad_.end(), 0.f);
  pi_.backward(policy_params(), pt, dm.data(), grad_.data());
  std::copy(dls.begin(), dls.end(), grad_.begin() + pi_.log_std_offset());
  v_.backward(value_params(), vt, dv.data(), grad_.data() + pi_.param_count());
  return t;
}

}  // namespace temper::control
