#include "temper/control/gaussian_policy.h"

#include <algorithm>

#include "temper/control/mlp_spec.h"
#include "temper/core/error.h"
#include "temper/core/rng.h"

namespace temper::control {

GaussianPolicy::GaussianPolicy(PolicySpec s)
    : spec_(std::move(s)),
      net_(mlp_spec(spec_.msg_dim > 0 ? spec_.obs_dim + spec_.subgoal_dim : spec_.obs_dim, spec_.hidden,
                    spec_.act_dim)) {
  TEMPER_CHECK(spec_.obs_dim >= 1 && spec_.msg_dim >= 0 && spec_.act_dim >= 1)
      << "policy: obs_dim " << spec_.obs_dim << ", msg_dim " << spec_.msg_dim << ", act_dim " << spec_.act_dim;
  TEMPER_CHECK(spec_.residual < 0 || spec_.residual + spec_.subgoal_dim <= spec_.msg_dim)
      << "policy: residual index " << spec_.residual << " + " << spec_.subgoal_dim << " outside the " << spec_.msg_dim
      << " message values";
  if (spec_.msg_dim > 0) adaptor_.emplace(mlp_spec(spec_.msg_dim, {spec_.adaptor_hidden}, spec_.subgoal_dim));
}

namespace {
void init_small_output(const nn::Mlp& m, float* p, uint64_t seed) {  // torch's init, the last layer x 0.01
  m.init(p, seed);
  const int64_t nin = m.spec().sizes[m.layers() - 1], nout = m.out();
  for (int64_t i = m.param_count() - nout * nin - nout; i < m.param_count(); ++i) p[i] *= 0.01f;
}
}  // namespace

void GaussianPolicy::init(float* p, uint64_t seed) const {
  if (adaptor_) init_small_output(*adaptor_, p, mix_seed(seed, 1));
  init_small_output(net_, p + adaptor_params(), mix_seed(seed, 2));
  std::fill(p + log_std_offset(), p + param_count(), spec_.init_log_std);
}

void GaussianPolicy::mean(const float* p, const float* x, int64_t B, float* mean, Tape* tape) const {
  if (!adaptor_) {
    net_.forward(p, x, B, mean, tape ? &tape->net : nullptr);
    return;
  }
  const int64_t o = spec_.obs_dim, m = spec_.msg_dim, g = spec_.subgoal_dim;
  std::vector<float> msg(static_cast<size_t>(B * m)), sub(static_cast<size_t>(B * g)),
      in(static_cast<size_t>(B * (o + g)));
  for (int64_t r = 0; r < B; ++r) std::copy(x + r * (o + m) + o, x + (r + 1) * (o + m), msg.begin() + r * m);
  adaptor_->forward(p, msg.data(), B, sub.data(), tape ? &tape->adaptor : nullptr);
  add_residual(x, B, sub.data());
  for (int64_t r = 0; r < B; ++r) {
    std::copy(x + r * (o + m), x + r * (o + m) + o, in.begin() + r * (o + g));
    std::copy(sub.begin() + r * g, sub.begin() + (r + 1) * g, in.begin() + r * (o + g) + o);
  }
  net_.forward(p + adaptor_params(), in.data(), B, mean, tape ? &tape->net : nullptr);
}

void GaussianPolicy::backward(const float* p, const Tape& tape, const float* d_mean, float* grad) const {
  if (!adaptor_) {
    net_.backward(p, tape.net, d_mean, grad);
    return;
  }
  const int64_t B = tape.net.rows, o = spec_.obs_dim, g = spec_.subgoal_dim;
  std::vector<float> d_in(static_cast<size_t>(B * (o + g))), d_sub(static_cast<size_t>(B * g));
  net_.backward(p + adaptor_params(), tape.net, d_mean, grad + adaptor_params(), d_in.data());
  for (int64_t r = 0; r < B; ++r)
    std::copy(d_in.begin() + r * (o + g) + o, d_in.begin() + (r + 1) * (o + g), d_sub.begin() + r * g);
  adaptor_->backward(p, tape.adaptor, d_sub.data(), grad);
}

void GaussianPolicy::subgoal(const float* p, const float* x, int64_t B, float* g) const {
  TEMPER_CHECK(adaptor_) << "policy: subgoal() of a policy without an adaptor";
  const int64_t o = spec_.obs_dim, m = spec_.msg_dim;
  std::vector<float> msg(static_cast<size_t>(B * m));
  for (int64_t r = 0; r < B; ++r) std::copy(x + r * (o + m) + o, x + (r + 1) * (o + m), msg.begin() + r * m);
  adaptor_->forward(p, msg.data(), B, g);
  add_residual(x, B, g);
}

void GaussianPolicy::add_residual(const float* x, int64_t B, float* g) const {
  if (spec_.residual < 0) return;
  const int64_t o = spec_.obs_dim, m = spec_.msg_dim, n = spec_.subgoal_dim;
  for (int64_t r = 0; r < B; ++r)
    for (int64_t j = 0; j < n; ++j) g[r * n + j] += x[r * (o + m) + o + spec_.residual + j];
}

}  // namespace temper::control
