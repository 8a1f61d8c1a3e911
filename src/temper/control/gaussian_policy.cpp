#include "temper/control/gaussian_policy.h"

#include <algorithm>

#include "temper/core/error.h"
#include "temper/core/rng.h"

namespace temper::control {

namespace {
nn::MlpSpec net_spec(const PolicySpec& s) {
  nn::MlpSpec m;
  m.sizes.push_back(s.msg_dim > 0 ? s.obs_dim + s.subgoal_dim : s.obs_dim);
  for (int64_t h : s.hidden) m.sizes.push_back(h);
  m.sizes.push_back(s.act_dim);
  return m;
}
}  // namespace

GaussianPolicy::GaussianPolicy(PolicySpec s) : spec_(std::move(s)), net_(net_spec(spec_)) {
  TEMPER_CHECK(spec_.obs_dim >= 1 && spec_.msg_dim >= 0 && spec_.act_dim >= 1)
      << "policy: obs_dim " << spec_.obs_dim << ", msg_dim " << spec_.msg_dim << ", act_dim " << spec_.act_dim;
  if (spec_.msg_dim > 0) adaptor_.emplace(nn::MlpSpec{{spec_.msg_dim, spec_.adaptor_hidden, spec_.subgoal_dim}});
}

void GaussianPolicy::init(float* p, uint64_t seed) const {
  if (adaptor_) adaptor_->init(p, mix_seed(seed, 1));
  float* np = p + adaptor_params();
  net_.init(np, mix_seed(seed, 2));
  const auto shapes = net_.param_shapes("net");
  int64_t last = 0;  // the last layer's W and b: the final two tensors
  for (size_t i = 0; i + 2 < shapes.size(); ++i) {
    int64_t n = 1;
    for (int64_t d : shapes[i].second) n *= d;
    last += n;
  }
  for (int64_t i = last; i < net_.param_count(); ++i) np[i] *= 0.01f;
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
}

}  // namespace temper::control
