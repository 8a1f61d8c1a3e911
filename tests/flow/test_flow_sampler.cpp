// Samplers (flow/sampler.h) on the exact velocity of Gaussian data (gaussian_field.h): the Euler ODE reaches
// the exact map at first order, the SDE keeps the marginals and its per-step log-probs are the Gaussian
// formula, classifier-free guidance combines the two forwards.
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

#include "flow/gaussian_field.h"
#include "temper/flow/mlp_flow.h"
#include "temper/flow/sampler.h"

namespace temper::flow {
namespace {

double ode_error(int64_t steps) {
  testing::GaussianField f(2, 1.5, 0.4);
  const int64_t B = 64;
  const auto z = initial_noise(B, 2, 11);
  const std::vector<int32_t> y(B, 0);
  OdeConfig c;
  c.steps = steps;
  const auto x = sample_ode(f, z.data(), y.data(), B, c);
  double worst = 0;
  for (size_t i = 0; i < x.size(); ++i) worst = std::max(worst, std::abs(x[i] - (1.5 + 0.4 * z[i])));
  return worst;
}

TEST(FlowSampler, EulerOdeCarriesNoiseToTheExactMapAtFirstOrder) {
  const double e100 = ode_error(100), e200 = ode_error(200), e1000 = ode_error(1000);
  EXPECT_LT(e1000, 5e-3);
  EXPECT_NEAR(e100 / e200, 2.0, 0.25);  // Euler: error halves with the step
  EXPECT_GT(e100, e1000);
}

TEST(FlowSampler, SdeStepLogProbIsTheGaussianFormulaAndTheMarginalsHold) {
  testing::GaussianField f(1, 1.0, 0.5);
  const int64_t B = 20000;
  const std::vector<int32_t> y(B, 0);
  SdeConfig c;
  c.steps = 50, c.noise = 0.7;
  const SdeTrajectory tr = sample_sde(f, y.data(), B, c, 5);
  // The log-prob of each transition against the Gaussian density written out here.
  std::vector<float> v(B);
  for (int64_t k : {0, 1, 25, 49}) {
    const SdeStep st = sde_step(c, k);
    const std::vector<float> tt(B, static_cast<float>(st.t));
    f.forward(tr.at(k), tt.data(), y.data(), B, v.data(), false);
    for (int64_t i = 0; i < 100; ++i) {
      const double mean = st.cx * tr.at(k)[i] + st.cv * v[static_cast<size_t>(i)], x = tr.at(k + 1)[i];
      const double want =
          -(x - mean) * (x - mean) / (2 * st.s * st.s) - 0.5 * std::log(2 * std::numbers::pi * st.s * st.s);
      EXPECT_NEAR(tr.logp[static_cast<size_t>(k * B + i)], want, 2e-4 * (1 + std::abs(want))) << k << " " << i;
    }
  }
  // Flow-GRPO's schedule at step 0: sig = a sqrt(t_1 / (1 - t_1)), s = sig sqrt(1 / steps).
  const SdeStep s0 = sde_step(c, 0);
  EXPECT_NEAR(s0.s, 0.7 * std::sqrt(0.98 / 0.02) * std::sqrt(0.02), 1e-12);
  // The reverse SDE keeps the marginals: the samples are N(1, 0.5^2).
  double m = 0, m2 = 0;
  for (int64_t i = 0; i < B; ++i) m += tr.sample()[i], m2 += tr.sample()[i] * tr.sample()[i];
  m /= B;
  const double sd = std::sqrt(m2 / B - m * m);
  EXPECT_NEAR(m, 1.0, 0.03);
  EXPECT_NEAR(sd, 0.5, 0.03);
  // A row's draws do not depend on the batch.
  const SdeTrajectory small = sample_sde(f, y.data(), 3, c, 5);
  for (int64_t i = 0; i < 3; ++i) EXPECT_EQ(small.sample()[i], tr.sample()[i]);
}

TEST(FlowSampler, ClassifierFreeGuidanceIsNullPlusScaleTimesDifference) {
  MlpFlowConfig mc;
  mc.classes = 3, mc.hidden = 16, mc.depth = 2;
  MlpFlow m(mc);
  m.init_params(3);
  const std::vector<float> x{0.3f, -1.f, 2.f, 0.5f}, t{0.7f, 0.7f};
  const std::vector<int32_t> y{0, 2}, null{3, 3};
  std::vector<float> vc(4), vu(4), g(4);
  m.forward(x.data(), t.data(), y.data(), 2, vc.data(), false);
  m.forward(x.data(), t.data(), null.data(), 2, vu.data(), false);
  guided_velocity(m, x.data(), 0.7, y.data(), 2, 3.0, g.data());
  for (int i = 0; i < 4; ++i) {
    EXPECT_NE(vc[i], vu[i]);
    EXPECT_NEAR(g[i], vu[i] + 3.0 * (vc[i] - vu[i]), 1e-5);
  }
  guided_velocity(m, x.data(), 0.7, y.data(), 2, 1.0, g.data());
  EXPECT_EQ(g, vc);
}

}  // namespace
}  // namespace temper::flow
