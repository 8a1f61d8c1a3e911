// Test fixture: the exact flow-matching velocity for data N(mu, s^2 I) (flow_matching.h's convention):
// x_t ~ N((1 - t) mu, V_t I), V_t = (1 - t)^2 s^2 + t^2, and
//   v*(x, t) = E[eps - x_0 | x_t = x] = -mu + (t - (1 - t) s^2) / V_t (x - (1 - t) mu),
// whose ODE carries x_1 = z to x_0 = mu + s z exactly. Two parameters (mu, log s): a VelocityModel whose
// backward is exact, for the samplers' and the RL losses' tests.
#pragma once

#include <cmath>
#include <vector>

#include "temper/flow/velocity_model.h"

namespace temper::flow::testing {

class GaussianField final : public VelocityModel {
 public:
  GaussianField(int64_t dim, double mu, double s)
      : dim_(dim), p_{static_cast<float>(mu), static_cast<float>(std::log(s))} {}
  int64_t dim() const override { return dim_; }
  int64_t classes() const override { return 1; }
  int64_t param_count() const override { return 2; }
  std::span<float> params() override { return p_; }
  std::span<const float> params() const override { return p_; }
  void init_params(uint64_t) override {}
  std::vector<std::pair<std::string, std::vector<int64_t>>> param_shapes() const override {
    return {{"mu", {1}}, {"log_s", {1}}};
  }
  void forward(const float* x, const float* t, const int32_t*, int64_t B, float* v, bool train) override {
    if (train) x_.assign(x, x + B * dim_), t_.assign(t, t + B);
    const double mu = p_[0], s2 = std::exp(2.0 * p_[1]);
    for (int64_t i = 0; i < B; ++i) {
      const double tt = t[i], V = (1 - tt) * (1 - tt) * s2 + tt * tt, a = (tt - (1 - tt) * s2) / V;
      for (int64_t j = 0; j < dim_; ++j)
        v[i * dim_ + j] = static_cast<float>(-mu + a * (x[i * dim_ + j] - (1 - tt) * mu));
    }
  }
  void backward(const float* dv, float* grad) override {
    const double mu = p_[0], s2 = std::exp(2.0 * p_[1]);
    for (size_t i = 0; i < t_.size(); ++i) {
      const double tt = t_[i], V = (1 - tt) * (1 - tt) * s2 + tt * tt, a = (tt - (1 - tt) * s2) / V;
      // da/ds2 = (-(1 - t) V - (t - (1 - t) s2)(1 - t)^2) / V^2; ds2/dlog_s = 2 s2
      const double da = (-(1 - tt) * V - (tt - (1 - tt) * s2) * (1 - tt) * (1 - tt)) / (V * V) * 2 * s2;
      for (int64_t j = 0; j < dim_; ++j) {
        const double g = dv[static_cast<int64_t>(i) * dim_ + j], xm = x_[i * dim_ + j] - (1 - tt) * mu;
        grad[0] += static_cast<float>(g * (-1 - a * (1 - tt)));
        grad[1] += static_cast<float>(g * da * xm);
      }
    }
  }

 private:
  int64_t dim_;
  std::vector<float> p_;
  std::vector<float> x_, t_;
};

}  // namespace temper::flow::testing
