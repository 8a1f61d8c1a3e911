// The 2-D MLP flow (flow/mlp_flow.h) and the flow-matching loss (flow/flow_matching.h) against PyTorch goldens
// (tools/ref/make_flow_golden.py, computed in float64): the velocity, the loss and every parameter's gradient,
// unconditional and with classes, the null label and sample weights; central finite differences on a few
// parameters; fm_draw's label dropout.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "temper/core/error.h"
#include "temper/flow/flow_matching.h"
#include "temper/flow/mlp_flow.h"
#include "temper/io/safetensors.h"

namespace temper::flow {
namespace {

std::vector<float> f32(const io::SafetensorsFile& f, const std::string& name) {
  const Tensor t = f.get(name);
  std::vector<float> out(static_cast<size_t>(t.numel()));
  io::copy_to_f32(t, out.data(), t.numel(), name);
  return out;
}

struct Golden {
  MlpFlowConfig cfg;
  bool weighted = false;
};

void check_golden(const std::string& file, const Golden& g) {
  const auto f = io::SafetensorsFile::open(std::string(TEMPER_TEST_DATA_DIR) + "/golden/flow/" + file);
  MlpFlow m(g.cfg);
  int64_t off = 0;
  for (const auto& [name, shape] : m.param_shapes()) {
    const auto p = f32(f, name);
    int64_t n = 1;
    for (int64_t s : shape) n *= s;
    ASSERT_EQ(static_cast<int64_t>(p.size()), n) << name;
    std::copy(p.begin(), p.end(), m.params().begin() + off);
    off += n;
  }
  ASSERT_EQ(off, m.param_count());
  const auto x0 = f32(f, "x0"), eps = f32(f, "eps"), t = f32(f, "t"), w = f32(f, "w"), xt = f32(f, "xt"),
             v_want = f32(f, "v");
  const Tensor yt = f.get("y");
  const std::vector<int32_t> y(yt.checked_data<int32_t>(DType::i32), yt.checked_data<int32_t>(DType::i32) + yt.numel());
  const auto B = static_cast<int64_t>(t.size());
  std::vector<float> v(v_want.size());
  m.forward(xt.data(), t.data(), y.data(), B, v.data(), false);
  for (size_t i = 0; i < v.size(); ++i)
    EXPECT_NEAR(v[i], v_want[i], 2e-5 * (1 + std::abs(v_want[i]))) << file << " v " << i;
  std::vector<float> grad(static_cast<size_t>(m.param_count()), 0.f);
  FmBatch b;
  b.B = B, b.x0 = x0.data(), b.y = y.data(), b.t = t.data(), b.eps = eps.data(), b.w = g.weighted ? w.data() : nullptr;
  const double loss = fm_loss_grad(m, b, grad.data());
  const Tensor lt = f.get("loss");
  EXPECT_NEAR(loss, lt.checked_data<double>(DType::f64)[0], 2e-5 * loss) << file;
  off = 0;
  for (const auto& [name, shape] : m.param_shapes()) {
    const auto want = f32(f, "grad." + name);
    double scale = 0;
    for (float x : want) scale = std::max(scale, static_cast<double>(std::abs(x)));
    ASSERT_GT(scale, 0) << name;  // every tensor's gradient is exercised
    for (size_t i = 0; i < want.size(); ++i)
      EXPECT_NEAR(grad[static_cast<size_t>(off) + i], want[i], 1e-5 * scale + 1e-6) << file << " " << name << " " << i;
    off += static_cast<int64_t>(want.size());
  }
}

TEST(MlpFlow, MatchesPyTorchUnconditional) {
  Golden g;
  g.cfg.hidden = 32, g.cfg.depth = 3, g.cfg.time_freqs = 8, g.cfg.class_dim = 8, g.cfg.act = "silu";
  check_golden("mlp2d_uncond.safetensors", g);
}

TEST(MlpFlow, MatchesPyTorchWithClassesNullLabelAndWeights) {
  Golden g;
  g.cfg.classes = 3, g.cfg.hidden = 24, g.cfg.depth = 2, g.cfg.time_freqs = 6, g.cfg.class_dim = 4, g.cfg.act = "tanh";
  g.weighted = true;
  check_golden("mlp2d_classes.safetensors", g);
}

TEST(MlpFlow, GradientMatchesCentralDifferences) {
  MlpFlowConfig c;
  c.classes = 2, c.hidden = 8, c.depth = 2, c.time_freqs = 3, c.class_dim = 2;
  MlpFlow m(c);
  m.init_params(5);
  const std::vector<float> x0{0.5f, -1.f, 2.f, 0.3f, -0.7f, 1.1f};
  const std::vector<int32_t> y{0, 1, 2};
  const FmDraw d = fm_draw(3, 2, y.data(), 2, 0.0, 9);
  FmBatch b;
  b.B = 3, b.x0 = x0.data(), b.y = d.y.data(), b.t = d.t.data(), b.eps = d.eps.data();
  std::vector<float> grad(static_cast<size_t>(m.param_count()), 0.f), scratch(grad.size());
  fm_loss_grad(m, b, grad.data());
  const int64_t table = m.param_count() - 3 * 2;  // the class table's first row
  for (int64_t i : {int64_t{0}, int64_t{17}, m.param_count() - 7, table, table + 5}) {
    const float keep = m.params()[static_cast<size_t>(i)];
    const float h = 1e-2f;
    m.params()[static_cast<size_t>(i)] = keep + h;
    const double up = fm_loss_grad(m, b, scratch.data());
    m.params()[static_cast<size_t>(i)] = keep - h;
    const double down = fm_loss_grad(m, b, scratch.data());
    m.params()[static_cast<size_t>(i)] = keep;
    EXPECT_NEAR(grad[static_cast<size_t>(i)], (up - down) / (2 * h),
                2e-3 * (1 + std::abs(grad[static_cast<size_t>(i)])))
        << i;
  }
}

TEST(MlpFlow, DrawDropsLabelsToNullAtTheRateAndRefusesBadLabels) {
  const std::vector<int32_t> y(4000, 1);
  const FmDraw d = fm_draw(4000, 2, y.data(), 3, 0.1, 1);
  int64_t null = 0;
  for (int32_t v : d.y) null += v == 3;
  EXPECT_NEAR(static_cast<double>(null) / 4000, 0.1, 0.015);
  for (float t : d.t) ASSERT_TRUE(t >= 0 && t < 1);
  const FmDraw again = fm_draw(2, 2, y.data(), 3, 0.1, 1);
  EXPECT_EQ(again.eps[3], d.eps[3]);  // a row's draws do not depend on B
  MlpFlow m({});
  const std::vector<float> x{0, 0}, t{0.5f};
  const std::vector<int32_t> bad{2};  // classes = 1: labels 0 and 1 (null)
  std::vector<float> v(2);
  EXPECT_THROW(m.forward(x.data(), t.data(), bad.data(), 1, v.data(), false), Error);
}

}  // namespace
}  // namespace temper::flow
