// nn::Mlp against a plain double-precision MLP written here (forward, every parameter's gradient, d/dx), the
// reference's gradient against central finite differences, and AdamW's first step by hand.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "temper/core/error.h"
#include "temper/core/rng.h"
#include "temper/nn/mlp.h"

namespace {

using temper::nn::Act;
using temper::nn::Mlp;
using temper::nn::MlpSpec;

double act_d(Act a, double x) {
  switch (a) {
    case Act::identity:
      return x;
    case Act::relu:
      return x > 0 ? x : 0;
    case Act::tanh:
      return std::tanh(x);
    case Act::silu:
      return x / (1 + std::exp(-x));
  }
  return 0;
}

// loss = sum_i c_i * y_i over every output, in double, for parameters p and input x.
double ref_loss(const MlpSpec& s, const std::vector<double>& p, const std::vector<double>& x, int64_t B,
                const std::vector<double>& c) {
  std::vector<double> cur = x;
  int64_t off = 0;
  for (size_t l = 0; l + 1 < s.sizes.size(); ++l) {
    const int64_t nin = s.sizes[l], nout = s.sizes[l + 1];
    const Act a = l + 2 == s.sizes.size() ? s.output : s.hidden;
    std::vector<double> next(B * nout);
    for (int64_t r = 0; r < B; ++r)
      for (int64_t j = 0; j < nout; ++j) {
        double z = p[off + nin * nout + j];
        for (int64_t k = 0; k < nin; ++k) z += cur[r * nin + k] * p[off + j * nin + k];
        next[r * nout + j] = act_d(a, z);
      }
    off += nin * nout + nout;
    cur = std::move(next);
  }
  double loss = 0;
  for (size_t i = 0; i < cur.size(); ++i) loss += c[i] * cur[i];
  return loss;
}

void check_against_reference(const MlpSpec& spec) {
  const Mlp mlp(spec);
  const int64_t B = 5;
  std::vector<float> p(mlp.param_count()), x(B * mlp.in()), c(B * mlp.out());
  mlp.init(p.data(), 7);
  temper::rng_fill_normal(11, 0, x);
  temper::rng_fill_normal(12, 0, c);
  std::vector<double> pd(p.begin(), p.end()), xd(x.begin(), x.end()), cd(c.begin(), c.end());

  Mlp::Tape tape;
  std::vector<float> y(B * mlp.out()), grad(mlp.param_count(), 0.f), dx(B * mlp.in());
  mlp.forward(p.data(), x.data(), B, y.data(), &tape);
  double loss = 0;
  for (size_t i = 0; i < y.size(); ++i) loss += double(c[i]) * y[i];
  EXPECT_NEAR(loss, ref_loss(spec, pd, xd, B, cd), 1e-4 * (1 + std::abs(loss)));
  mlp.backward(p.data(), tape, c.data(), grad.data(), dx.data());

  const double h = 1e-6;  // central differences of the double reference: error ~h^2
  for (size_t i = 0; i < pd.size(); ++i) {
    auto plus = pd, minus = pd;
    plus[i] += h, minus[i] -= h;
    const double fd = (ref_loss(spec, plus, xd, B, cd) - ref_loss(spec, minus, xd, B, cd)) / (2 * h);
    ASSERT_NEAR(grad[i], fd, 2e-4 * (1 + std::abs(fd))) << "parameter " << i;
  }
  for (size_t i = 0; i < xd.size(); ++i) {
    auto plus = xd, minus = xd;
    plus[i] += h, minus[i] -= h;
    const double fd = (ref_loss(spec, pd, plus, B, cd) - ref_loss(spec, pd, minus, B, cd)) / (2 * h);
    ASSERT_NEAR(dx[i], fd, 2e-4 * (1 + std::abs(fd))) << "input " << i;
  }
}

TEST(Mlp, TanhMatchesReferenceAndFiniteDifferences) {
  check_against_reference({{3, 7, 5, 2}, Act::tanh});
}
TEST(Mlp, SiluMatchesReferenceAndFiniteDifferences) {
  check_against_reference({{4, 6, 3}, Act::silu, Act::tanh});
}
TEST(Mlp, ReluMatchesReferenceAndFiniteDifferences) {
  check_against_reference({{2, 9, 1}, Act::relu});
}

TEST(Mlp, BackwardAccumulatesAndRowsAreIndependent) {
  const Mlp mlp({{3, 8, 2}, Act::silu});
  std::vector<float> p(mlp.param_count()), x(6 * 3);
  mlp.init(p.data(), 3);
  temper::rng_fill_normal(4, 0, x);
  std::vector<float> y6(6 * 2), y1(2);
  mlp.forward(p.data(), x.data(), 6, y6.data());
  mlp.forward(p.data(), x.data() + 3 * 3, 1, y1.data());  // row 3 alone gives row 3's bits
  EXPECT_EQ(y1[0], y6[6]);
  EXPECT_EQ(y1[1], y6[7]);

  Mlp::Tape tape;
  std::vector<float> dy(6 * 2, 1.f), g1(mlp.param_count(), 0.f), g2(mlp.param_count(), 0.f);
  mlp.forward(p.data(), x.data(), 6, y6.data(), &tape);
  mlp.backward(p.data(), tape, dy.data(), g1.data());
  mlp.backward(p.data(), tape, dy.data(), g2.data());
  mlp.backward(p.data(), tape, dy.data(), g2.data());
  for (size_t i = 0; i < g1.size(); ++i) ASSERT_NEAR(g2[i], 2 * g1[i], 1e-5f * (1 + std::abs(g1[i])));
}

TEST(Mlp, InitFollowsTorchLinearBoundsAndSeed) {
  const Mlp mlp({{16, 4}, Act::tanh});
  std::vector<float> a(mlp.param_count()), b(mlp.param_count()), c(mlp.param_count());
  mlp.init(a.data(), 1);
  mlp.init(b.data(), 1);
  mlp.init(c.data(), 2);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  for (float v : a) EXPECT_LE(std::abs(v), 0.25f);  // 1/sqrt(16)
  const auto shapes = mlp.param_shapes("net");
  ASSERT_EQ(shapes.size(), 2u);
  EXPECT_EQ(shapes[0].first, "net.0.weight");
  EXPECT_EQ(shapes[0].second, (std::vector<int64_t>{4, 16}));
  EXPECT_EQ(shapes[1].second, (std::vector<int64_t>{4}));
}

TEST(Mlp, RefusesBadShapes) {
  const MlpSpec one{{3}, Act::tanh}, zero{{3, 0, 2}, Act::tanh};
  EXPECT_THROW(Mlp{one}, temper::Error);
  EXPECT_THROW(Mlp{zero}, temper::Error);
}

TEST(AdamW, FirstStepIsTorchs) {  // step 1: m = (1-b1) g, v = (1-b2) g^2, p -= lr * m_hat / (sqrt(v_hat) + eps)
  temper::nn::AdamW opt(2, {0.9f, 0.999f, 1e-8f, 0.f});
  std::vector<float> p = {1.f, -2.f}, g = {0.5f, -4.f};
  const double norm = opt.update(p.data(), g.data(), 0.1f);
  EXPECT_NEAR(norm, std::sqrt(0.25 + 16.0), 1e-6);
  EXPECT_NEAR(p[0], 1.f - 0.1f, 1e-6);  // m_hat / sqrt(v_hat) = sign(g)
  EXPECT_NEAR(p[1], -2.f + 0.1f, 1e-6);
  EXPECT_EQ(opt.step, 1);
}

}  // namespace
