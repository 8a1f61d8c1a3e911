// The DiT (src/temper/flow/dit.h) against the PyTorch goldens of tools/ref/make_dit_golden.py: the
// velocity and every parameter's gradient of the flow-matching loss mean((v - target)^2), in f32 (fp64
// reference) and with bf16 products; the layout's names and shapes are torch's state_dict; finite
// differences on a few parameters; DiT's init (adaLN-Zero: the output starts at zero); a sampling forward
// leaves the training tape alone.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/test_data.h"
#include "common/tolerance.h"
#include "temper/core/error.h"
#include "temper/core/thread_pool.h"
#include "temper/flow/dit.h"
#include "temper/io/safetensors.h"

using namespace temper;
using namespace temper::flow;

namespace {

struct Golden {
  explicit Golden(const std::string& name)
      : file(io::SafetensorsFile::open(test::test_data("golden/dit/" + name + ".safetensors"))) {
    meta = nlohmann::json::parse(file.metadata().at("golden"));
    const auto& c = meta.at("config");
    cfg.image = c.at("image"), cfg.channels = c.at("channels"), cfg.patch = c.at("patch");
    cfg.hidden = c.at("hidden"), cfg.depth = c.at("depth"), cfg.heads = c.at("heads");
    cfg.mlp_ratio = c.at("mlp_ratio"), cfg.classes = c.at("classes"), cfg.t_scale = c.at("t_scale");
    cfg.freq_dim = meta.at("freq_dim");
    B = c.at("batch");
  }
  std::vector<float> f32(const std::string& n) const {
    Tensor t = file.get(n);
    std::vector<float> v(static_cast<size_t>(t.numel()));
    io::copy_to_f32(t, v.data(), t.numel(), n);
    return v;
  }
  std::vector<int32_t> labels() const {
    Tensor t = file.get("y");
    return std::vector<int32_t>(t.data<int32_t>(), t.data<int32_t>() + t.numel());
  }
  void load(Dit& m) const {
    const DitLayout& l = m.layout();
    for (size_t i = 0; i < l.shapes.size(); ++i) {
      std::vector<float> w = f32(l.shapes[i].first);
      std::copy(w.begin(), w.end(), m.params().begin() + l.offsets[i]);
    }
  }
  io::SafetensorsFile file;
  nlohmann::json meta;
  DitConfig cfg;
  int64_t B = 0;
};

// d mean((v - target)^2) / dv and the loss.
double loss_grad(const std::vector<float>& v, const std::vector<float>& target, std::vector<float>* dv) {
  double loss = 0;
  const double n = static_cast<double>(v.size());
  if (dv) dv->resize(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    const double d = static_cast<double>(v[i]) - target[i];
    loss += d * d / n;
    if (dv) (*dv)[i] = static_cast<float>(2.0 * d / n);
  }
  return loss;
}

// Runs the golden's forward and backward; returns v and the gradient.
void run(const Golden& g, Dit& m, std::vector<float>& v, std::vector<float>& grad) {
  const auto x = g.f32("x"), t = g.f32("t"), target = g.f32("target");
  const auto y = g.labels();
  v.assign(x.size(), 0.f);
  m.forward(x.data(), t.data(), y.data(), g.B, v.data(), true);
  std::vector<float> dv;
  loss_grad(v, target, &dv);
  grad.assign(static_cast<size_t>(m.param_count()), 0.f);
  m.backward(dv.data(), grad.data());
}

void check_golden(const std::string& name, kernels::Precision precision) {
  Golden g(name);
  g.cfg.precision = precision;
  Dit m(g.cfg);
  const DitLayout& l = m.layout();
  // the layout is torch's state_dict: names in order, shapes
  const auto names = g.meta.at("names").get<std::vector<std::string>>();
  ASSERT_EQ(names.size(), l.shapes.size());
  for (size_t i = 0; i < names.size(); ++i) {
    EXPECT_EQ(names[i], l.shapes[i].first);
    Tensor t = g.file.get(names[i]);
    std::vector<int64_t> shape(t.shape().dims().begin(), t.shape().dims().end());
    EXPECT_EQ(shape, l.shapes[i].second) << names[i];
  }
  g.load(m);
  std::vector<float> v, grad;
  run(g, m, v, grad);
  const int64_t K = std::max({g.cfg.hidden, g.cfg.ffn(), g.cfg.freq_dim}) * g.cfg.depth;
  const bool bf16 = precision == kernels::Precision::bf16;
  const double tol = bf16 ? test::tolerance(test::Kind::bf16, K) : test::tolerance(test::Kind::reduction, K);
  EXPECT_TRUE(test::all_close(v, g.f32("v"), tol)) << "v";
  const double want_loss = g.file.get("loss").data<double>()[0];
  EXPECT_NEAR(loss_grad(v, g.f32("target"), nullptr), want_loss, (bf16 ? 1e-2 : 1e-5) * want_loss);
  // Gradients through the whole network and back: the backward's reductions are longer (B*T rows).
  const double gtol = bf16 ? 3 * tol : test::tolerance(test::Kind::reduction, K * g.B * g.cfg.tokens() / 8);
  for (size_t i = 0; i < l.shapes.size(); ++i) {
    const auto want = g.f32("grad." + l.shapes[i].first);
    EXPECT_TRUE(test::all_close(grad.data() + l.offsets[i], want.data(), static_cast<int64_t>(want.size()), gtol))
        << "grad of " << l.shapes[i].first;
  }
}

}  // namespace

TEST(Dit, GoldenRgbF32) {
  check_golden("dit_rgb", kernels::Precision::f32);
}
TEST(Dit, GoldenGrayF32) {
  check_golden("dit_gray", kernels::Precision::f32);
}
TEST(Dit, GoldenRgbBf16) {
  check_golden("dit_rgb", kernels::Precision::bf16);
}

// Central differences of the f32 loss on the golden's parameters, for each tensor's element with the
// largest gradient (a direction the loss sees), against backward().
TEST(Dit, FiniteDifferences) {
  Golden g("dit_gray");
  Dit m(g.cfg);
  g.load(m);
  std::vector<float> v, grad;
  run(g, m, v, grad);
  const auto x = g.f32("x"), t = g.f32("t"), target = g.f32("target");
  const auto y = g.labels();
  const DitLayout& l = m.layout();
  int checked = 0;
  for (size_t i = 0; i < l.shapes.size(); i += 3) {
    const int64_t n = (i + 1 < l.offsets.size() ? l.offsets[i + 1] : l.total) - l.offsets[i];
    const float* gi = grad.data() + l.offsets[i];
    const int64_t j = l.offsets[i] +
                      (std::max_element(gi, gi + n, [](float a, float b) { return std::fabs(a) < std::fabs(b); }) - gi);
    const float p0 = m.params()[j], h = 2e-3f * std::max(1.0f, std::fabs(p0));
    auto loss_at = [&](float p) {
      m.params()[j] = p;
      std::vector<float> out(x.size());
      m.forward(x.data(), t.data(), y.data(), g.B, out.data(), false);
      return loss_grad(out, target, nullptr);
    };
    const double fd = (loss_at(p0 + h) - loss_at(p0 - h)) / (2.0 * static_cast<double>(h));
    m.params()[j] = p0;
    EXPECT_NEAR(fd, grad[j], 2e-2 * std::fabs(grad[j]) + 1e-5) << l.shapes[i].first << " element " << j - l.offsets[i];
    ++checked;
  }
  EXPECT_GE(checked, 8);
}

// DiT's init: zero adaLN modulations and final layer, so the velocity is exactly zero; the same seed gives the
// same parameters; the weights are not all zero.
TEST(Dit, InitIsAdaLnZero) {
  DitConfig c;
  c.image = 8, c.patch = 2, c.hidden = 32, c.heads = 2, c.classes = 3;
  Dit a(c), b(c);
  a.init_params(5), b.init_params(5);
  EXPECT_TRUE(std::equal(a.params().begin(), a.params().end(), b.params().begin()));
  const DitLayout& l = a.layout();
  const float* p = a.params().data();
  EXPECT_NE(p[l.blocks[0].qkv.w], 0.f);
  EXPECT_EQ(p[l.blocks[0].ada.w], 0.f);
  double var = 0;
  const int64_t n = l.blocks[0].fc1.in * l.blocks[0].fc1.out;
  for (int64_t i = 0; i < n; ++i) var += p[l.blocks[0].fc1.w + i] * p[l.blocks[0].fc1.w + i] / n;
  const double bound2 = 6.0 / static_cast<double>(l.blocks[0].fc1.in + l.blocks[0].fc1.out);
  EXPECT_NEAR(var, bound2 / 3.0, 0.1 * bound2 / 3.0);  // U(-a, a) has variance a^2 / 3
  std::vector<float> x(2 * a.dim(), 0.5f), t{0.3f, 0.9f}, v(2 * a.dim(), 1.f);
  std::vector<int32_t> y{1, 3};
  a.forward(x.data(), t.data(), y.data(), 2, v.data(), false);
  EXPECT_TRUE(std::all_of(v.begin(), v.end(), [](float e) { return e == 0.f; }));
}

// A sampling forward between the training forward and backward does not change the gradient.
TEST(Dit, EvalForwardKeepsTrainingTape) {
  Golden g("dit_gray");
  Dit m(g.cfg);
  g.load(m);
  std::vector<float> v, want;
  run(g, m, v, want);
  const auto x = g.f32("x"), t = g.f32("t"), target = g.f32("target");
  const auto y = g.labels();
  m.forward(x.data(), t.data(), y.data(), g.B, v.data(), true);
  std::vector<float> dv, grad(want.size(), 0.f), other(x.size() * 2, 0.1f), t2(4, 0.5f), vo(other.size());
  std::vector<int32_t> y2(4, 0);
  m.forward(other.data(), t2.data(), y2.data(), 2 * g.B, vo.data(), false);
  loss_grad(v, target, &dv);
  m.backward(dv.data(), grad.data());
  EXPECT_EQ(grad, want);
}

// The same bits for 1 and 2 threads: the products' sums, the attention tasks and the per-item and bias reductions
// never depend on the thread count (f32 and bf16 products).
TEST(Dit, SameBitsForAnyThreadCount) {
  for (auto precision : {kernels::Precision::f32, kernels::Precision::bf16}) {
    Golden g("dit_rgb");
    g.cfg.precision = precision;
    Dit m(g.cfg);
    g.load(m);
    std::vector<float> v1, g1, v2, g2;
    const int before = num_threads();
    set_num_threads(1);
    run(g, m, v1, g1);
    set_num_threads(2);
    run(g, m, v2, g2);
    set_num_threads(before);
    EXPECT_EQ(v1, v2) << kernels::precision_name(precision);
    EXPECT_EQ(g1, g2) << kernels::precision_name(precision);
  }
}

TEST(Dit, Refusals) {
  DitConfig c;
  c.image = 10, c.patch = 4;
  EXPECT_THROW(Dit{c}, Error);
  c = DitConfig{};
  c.heads = 5;
  EXPECT_THROW(Dit{c}, Error);
  c = DitConfig{};
  c.classes = 2;
  Dit m(c);
  std::vector<float> x(m.dim()), t(1), v(m.dim()), dv(m.dim()), grad(m.param_count());
  std::vector<int32_t> y{3};
  EXPECT_THROW(m.backward(dv.data(), grad.data()), Error);
  EXPECT_THROW(m.forward(x.data(), t.data(), y.data(), 1, v.data(), true), Error);
}
