// Harness entries for the elementwise/row ops: RMSNorm, RoPE (and its scalings, against transformers'
// goldens), SwiGLU, GeGLU, embedding.
#include <algorithm>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "common/op_harness.h"
#include "common/test_data.h"
#include "common/tolerance.h"
#include "temper/core/error.h"
#include "temper/kernels/bias.h"
#include "temper/kernels/embedding.h"
#include "temper/kernels/geglu.h"
#include "temper/kernels/ref/geglu_ref.h"
#include "temper/kernels/ref/rmsnorm_ref.h"
#include "temper/kernels/ref/rope_ref.h"
#include "temper/kernels/ref/swiglu_ref.h"
#include "temper/kernels/rmsnorm.h"
#include "temper/kernels/rope.h"
#include "temper/kernels/swiglu.h"

using namespace temper;
using namespace temper::kernels;
using namespace temper::test;

TEST(OpRmsnorm, ForwardBackwardEveryIsa) {
  for (auto [N, C] : {std::pair<int64_t, int64_t>{1, 1}, {5, 17}, {70, 64}, {33, 576}}) {
    SCOPED_TRACE("N=" + std::to_string(N) + " C=" + std::to_string(C));
    auto x = random_vec(N * C, 11), w = random_vec(C, 12, 0.3f), dy = random_vec(N * C, 13);
    for (auto& v : w) v += 1.0f;
    auto xd = to_f64(x), wd = to_f64(w), dyd = to_f64(dy);
    const double eps = 1e-5;
    std::vector<double> y_ref(N * C), dx_ref(N * C), dw_ref(C, 0.0);
    ref::rmsnorm_fwd(xd.data(), wd.data(), y_ref.data(), N, C, eps);
    ref::rmsnorm_bwd(dyd.data(), xd.data(), wd.data(), dx_ref.data(), dw_ref.data(), N, C, eps);
    auto loss = [&] {
      std::vector<double> y(N * C);
      ref::rmsnorm_fwd(xd.data(), wd.data(), y.data(), N, C, eps);
      double s = 0;
      for (size_t i = 0; i < y.size(); ++i) s += y[i] * dyd[i];
      return s;
    };
    EXPECT_TRUE(fd_check(xd, dx_ref, loss));
    EXPECT_TRUE(fd_check(wd, dw_ref, loss));
    for_each_isa([&](Isa) {
      std::vector<float> y(N * C), rstd(N), dx(N * C), dw(C, 0.f);
      rmsnorm_fwd(x.data(), w.data(), y.data(), rstd.data(), N, C, float(eps));
      EXPECT_TRUE(all_close(y, y_ref, tolerance(Kind::reduction, C)));
      rmsnorm_bwd(dy.data(), x.data(), w.data(), rstd.data(), dx.data(), dw.data(), N, C);
      EXPECT_TRUE(all_close(dx, dx_ref, tolerance(Kind::reduction, C), 1e-6));  // terms O(1), may cancel
      EXPECT_TRUE(all_close(dw, dw_ref, tolerance(Kind::reduction, N)));
    });
  }
}

TEST(OpRope, ForwardBackwardEveryIsa) {
  for (auto [H, D] : {std::pair<int64_t, int64_t>{1, 2}, {3, 16}, {9, 64}, {2, 24}}) {
    int64_t rows = 13;
    double theta = 10000.0;
    std::vector<int32_t> pos(rows);
    for (int64_t r = 0; r < rows; ++r) pos[r] = int32_t((r * 37) % 50);
    auto x = random_vec(rows * H * D, 21), dy = random_vec(rows * H * D, 22);
    auto y_ref = to_f64(x), dx_ref = to_f64(dy);
    ref::rope(y_ref.data(), pos.data(), rows, H, D, theta, false);
    ref::rope(dx_ref.data(), pos.data(), rows, H, D, theta, true);
    auto xd = to_f64(x), dyd = to_f64(dy);
    auto loss = [&] {
      auto y = xd;
      ref::rope(y.data(), pos.data(), rows, H, D, theta, false);
      double s = 0;
      for (size_t i = 0; i < y.size(); ++i) s += y[i] * dyd[i];
      return s;
    };
    EXPECT_TRUE(fd_check(xd, dx_ref, loss));
    RopeTable table = rope_table(64, D, theta);
    for_each_isa([&](Isa) {
      auto y = x, dx = dy;
      rope_fwd(y.data(), pos.data(), table, rows, H, D, H * D);
      rope_bwd(dx.data(), pos.data(), table, rows, H, D, H * D);
      EXPECT_TRUE(all_close(y, y_ref, tolerance(Kind::elementwise, 1, 2.0)));
      EXPECT_TRUE(all_close(dx, dx_ref, tolerance(Kind::elementwise, 1, 2.0)));
    });
  }
}

TEST(OpRope, PositionOutsideTableIsAnError) {
  RopeTable table = rope_table(4, 8, 10000.0);
  std::vector<float> x(8);
  int32_t pos = 4;
  EXPECT_THROW(rope_fwd(x.data(), &pos, table, 1, 1, 8, 8), temper::Error);
}

TEST(OpSwiglu, ForwardBackwardEveryIsa) {
  for (auto [N, F] : {std::pair<int64_t, int64_t>{1, 1}, {3, 15}, {5, 16}, {7, 88}, {2, 20001}}) {
    SCOPED_TRACE("N=" + std::to_string(N) + " F=" + std::to_string(F));
    auto gu = random_vec(N * 2 * F, 31, 3.0f), dh = random_vec(N * F, 33);
    auto gud = to_f64(gu), dhd = to_f64(dh);
    std::vector<double> h_ref(N * F), dgu_ref(N * 2 * F);
    auto ref_fwd = [&](std::vector<double>& h) {
      for (int64_t n = 0; n < N; ++n) ref::swiglu_fwd(gud.data() + n * 2 * F, gud.data() + n * 2 * F + F, h.data() + n * F, F);
    };
    ref_fwd(h_ref);
    for (int64_t n = 0; n < N; ++n)
      ref::swiglu_bwd(gud.data() + n * 2 * F, gud.data() + n * 2 * F + F, dhd.data() + n * F, dgu_ref.data() + n * 2 * F,
                      dgu_ref.data() + n * 2 * F + F, F);
    auto loss = [&] {
      std::vector<double> h(N * F);
      ref_fwd(h);
      double s = 0;
      for (int64_t i = 0; i < N * F; ++i) s += h[i] * dhd[i];
      return s;
    };
    EXPECT_TRUE(fd_check(gud, dgu_ref, loss));
    for_each_isa([&](Isa) {
      std::vector<float> h(N * F), dgu(N * 2 * F);
      swiglu_fwd(gu.data(), h.data(), N, F);
      swiglu_bwd(gu.data(), dh.data(), dgu.data(), N, F);
      EXPECT_TRUE(all_close(h, h_ref, tolerance(Kind::elementwise, 1, 4.0)));
      EXPECT_TRUE(all_close(dgu, dgu_ref, tolerance(Kind::elementwise, 1, 4.0)));
    });
  }
}

TEST(OpGeglu, ForwardBackwardEveryIsa) {
  for (auto [N, F] : {std::pair<int64_t, int64_t>{1, 1}, {3, 15}, {5, 16}, {7, 88}, {2, 20001}}) {
    SCOPED_TRACE("N=" + std::to_string(N) + " F=" + std::to_string(F));
    auto gu = random_vec(N * 2 * F, 35, 3.0f), dh = random_vec(N * F, 36);
    auto gud = to_f64(gu), dhd = to_f64(dh);
    std::vector<double> h_ref(N * F), dgu_ref(N * 2 * F);
    auto ref_fwd = [&](std::vector<double>& h) {
      for (int64_t n = 0; n < N; ++n)
        ref::geglu_fwd(gud.data() + n * 2 * F, gud.data() + n * 2 * F + F, h.data() + n * F, F);
    };
    ref_fwd(h_ref);
    for (int64_t n = 0; n < N; ++n)
      ref::geglu_bwd(gud.data() + n * 2 * F, gud.data() + n * 2 * F + F, dhd.data() + n * F, dgu_ref.data() + n * 2 * F,
                     dgu_ref.data() + n * 2 * F + F, F);
    auto loss = [&] {
      std::vector<double> h(N * F);
      ref_fwd(h);
      double s = 0;
      for (int64_t i = 0; i < N * F; ++i) s += h[i] * dhd[i];
      return s;
    };
    EXPECT_TRUE(fd_check(gud, dgu_ref, loss));
    for_each_isa([&](Isa) {
      std::vector<float> h(N * F), dgu(N * 2 * F);
      geglu_fwd(gu.data(), h.data(), N, F);
      geglu_bwd(gu.data(), dh.data(), dgu.data(), N, F);
      EXPECT_TRUE(all_close(h, h_ref, tolerance(Kind::elementwise, 1, 4.0)));
      EXPECT_TRUE(all_close(dgu, dgu_ref, tolerance(Kind::elementwise, 1, 4.0)));
    });
  }
}

TEST(OpGeglu, GeluMatchesTorchTanhApproximation) {
  // torch 2.5.1: torch.nn.functional.gelu(x, approximate='tanh') in float32 (tools/ref venv), gate x, up 1.
  const std::vector<float> x = {-6.f, -3.f, -1.5f, -0.5f, -1e-3f, 0.f, 2e-2f, 0.3f, 0.7f, 1.f, 2.5f, 5.f, 12.f};
  const std::vector<float> want = {-0.f,        -0.00363743305f, -0.100428432f, -0.154285997f, -0.000499601068f,
                                   0.f,         0.0101595661f,   0.185370937f,  0.530570149f,  0.841192007f,
                                   2.48491573f, 4.99999952f,     12.f};
  const int64_t F = static_cast<int64_t>(x.size());
  std::vector<float> gu(x);
  gu.resize(2 * x.size(), 1.f);
  for_each_isa([&](Isa) {
    std::vector<float> h(x.size());
    geglu_fwd(gu.data(), h.data(), 1, F);
    for (int64_t i = 0; i < F; ++i)  // tanh to ~2 ulp; 1 + tanh cancels for negative x (as in torch)
      EXPECT_NEAR(h[i], want[i], 4e-7 * std::max(1.f, std::fabs(want[i]))) << "x = " << x[i];
  });
}

namespace {
std::vector<double> json_doubles(const nlohmann::json& j) {
  return j.get<std::vector<double>>();
}

RopeScaling rope_scaling_of(const nlohmann::json& c) {
  RopeScaling s;
  const std::string type = c.at("type");
  s.type = type == "linear"     ? RopeScaling::Type::linear
           : type == "llama3"   ? RopeScaling::Type::llama3
           : type == "longrope" ? RopeScaling::Type::longrope
                                : RopeScaling::Type::none;
  s.factor = c.at("factor");
  s.low_freq_factor = c.value("low_freq_factor", 1.0);
  s.high_freq_factor = c.value("high_freq_factor", 4.0);
  s.original_max_position = c.at("original_max_position");
  if (c.contains("short_factor")) s.short_factor = json_doubles(c.at("short_factor"));
  if (c.contains("long_factor")) s.long_factor = json_doubles(c.at("long_factor"));
  s.attention_factor = c.value("attention_factor", 0.0);
  s.use_long = c.at("use_long");
  return s;
}
}  // namespace

// tests/data/golden/rope/rope.json (tools/ref/make_rope_goldens.py): transformers 4.51.3's rotary modules
// (LlamaRotaryEmbedding, Phi3RotaryEmbedding) for none, linear, llama3 and longrope (short, long, given
// attention factor). inv_freq equal bit for bit where torch's powf is correctly rounded ("pow_exact"),
// else within 1 ulp; cos and sin within 1 ulp of cos(float angle) plus the angle error position x the
// inv_freq difference (0 when inv_freq is equal).
TEST(OpRope, ScalingMatchesTransformersGolden) {
  std::ifstream f(test_data("golden/rope/rope.json"));
  ASSERT_TRUE(f.good()) << test_data("golden/rope/rope.json") << " is missing (tools/ref/make_rope_goldens.py)";
  const nlohmann::json doc = nlohmann::json::parse(f);
  ASSERT_EQ(doc.at("cases").size(), 12u);
  for (const auto& c : doc.at("cases")) {
    const std::string name = c.at("name");
    SCOPED_TRACE(name);
    const int64_t D = c.at("D"), half = D / 2;
    const double theta = c.at("theta");
    const RopeScaling s = rope_scaling_of(c);
    const auto pos = c.at("positions").get<std::vector<int64_t>>();
    const auto inv_want = json_doubles(c.at("inv_freq")), cos_want = json_doubles(c.at("cos")),
               sin_want = json_doubles(c.at("sin"));
    const RopeTable t = rope_table(*std::max_element(pos.begin(), pos.end()) + 1, D, theta, s);
    EXPECT_EQ(t.attention_scaling, static_cast<float>(c.at("attention_scaling").get<double>()));
    ASSERT_EQ(static_cast<int64_t>(t.inv_freq.size()), half);
    int64_t differ = 0;
    for (int64_t i = 0; i < half; ++i) {
      const float want = static_cast<float>(inv_want[static_cast<size_t>(i)]);
      if (t.inv_freq[static_cast<size_t>(i)] == want) continue;
      ++differ;
      EXPECT_FALSE(c.at("pow_exact").get<bool>())
          << "inv_freq[" << i << "] " << t.inv_freq[static_cast<size_t>(i)] << " != " << want;
      EXPECT_EQ(std::nextafter(want, t.inv_freq[static_cast<size_t>(i)]), t.inv_freq[static_cast<size_t>(i)])
          << "inv_freq[" << i << "] more than 1 ulp from transformers'";
    }
    EXPECT_LE(differ, 1);
    const float att = t.attention_scaling;
    for (size_t r = 0; r < pos.size(); ++r)
      for (int64_t i = 0; i < half; ++i) {
        const size_t k = r * static_cast<size_t>(half) + static_cast<size_t>(i);
        const double dinv = std::fabs(double(t.inv_freq[static_cast<size_t>(i)]) - inv_want[static_cast<size_t>(i)]);
        const double tol = att * (1.5e-7 + 1.0001 * static_cast<double>(pos[r]) * dinv);
        const size_t at = static_cast<size_t>(pos[r] * half + i);
        ASSERT_NEAR(t.cos[at], cos_want[k], tol) << "cos at position " << pos[r] << ", i " << i;
        ASSERT_NEAR(t.sin[at], sin_want[k], tol) << "sin at position " << pos[r] << ", i " << i;
      }
  }
}

TEST(OpRope, UnscaledTableIsTheOldTableAndScalingErrorsNameTheField) {
  const RopeTable a = rope_table(300, 48, 10000.0), b = rope_table(300, 48, 10000.0, RopeScaling{});
  EXPECT_EQ(a.cos, b.cos);
  EXPECT_EQ(a.sin, b.sin);
  EXPECT_EQ(a.attention_scaling, 1.f);
  RopeScaling lr;
  lr.type = RopeScaling::Type::longrope;
  lr.factor = 32;
  lr.original_max_position = 4096;
  lr.short_factor.assign(23, 1.0);  // D/2 = 24 expected
  try {
    rope_table(8, 48, 10000.0, lr);
    ADD_FAILURE() << "a short_factor of the wrong length was accepted";
  } catch (const temper::Error& e) {
    EXPECT_NE(std::string(e.what()).find("short_factor has 23 entries, expected head_dim / 2 = 24"), std::string::npos)
        << e.what();
  }
  RopeScaling l3;
  l3.type = RopeScaling::Type::llama3;
  l3.factor = 8;  // original_max_position missing
  EXPECT_THROW(rope_table(8, 48, 500000.0, l3), temper::Error);
  // Linear scaling divides every frequency: position p of the scaled table is position p / factor unscaled.
  RopeScaling lin;
  lin.type = RopeScaling::Type::linear;
  lin.factor = 4;
  const RopeTable s = rope_table(400, 48, 10000.0, lin);
  for (int64_t i = 0; i < 24; ++i) EXPECT_EQ(s.inv_freq[i], a.inv_freq[i] / 4.f);
  for (int64_t i = 0; i < 24; ++i) {  // 148 * (f / 4) == 37 * f exactly: a power-of-two factor
    EXPECT_EQ(s.cos[(4 * 37) * 24 + i], a.cos[37 * 24 + i]);
    EXPECT_EQ(s.sin[(4 * 37) * 24 + i], a.sin[37 * 24 + i]);
  }
}

TEST(OpEmbedding, GatherAndScatterAdd) {
  int64_t V = 11, C = 37, N = 20;
  auto table = random_vec(V * C, 41), dout = random_vec(N * C, 42);
  std::vector<int32_t> ids(N);
  for (int64_t n = 0; n < N; ++n) ids[n] = int32_t((n * 5) % 7);  // repeats
  std::vector<float> out(N * C), dtab(V * C, 0.f);
  embedding_fwd(table.data(), ids.data(), out.data(), N, V, C);
  embedding_bwd(dout.data(), ids.data(), dtab.data(), N, C);
  std::vector<double> dref(V * C, 0.0);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c) {
      EXPECT_EQ(out[n * C + c], table[ids[n] * C + c]);
      dref[ids[n] * C + c] += dout[n * C + c];
    }
  EXPECT_TRUE(all_close(dtab, dref, tolerance(Kind::reduction, N)));
  ids[3] = int32_t(V);
  EXPECT_THROW(embedding_fwd(table.data(), ids.data(), out.data(), N, V, C), temper::Error);
}

TEST(OpRmsnorm, PerHeadStridedEveryIsa) {
  // Qwen3 q_norm: token rows of stride 100 holding H=3 heads of D=24 at offset 10; rest untouched.
  int64_t N = 37, H = 3, D = 24, stride = 100, off = 10;
  auto buf = random_vec(N * stride, 91), w = random_vec(D, 92, 0.2f), dy = random_vec(N * stride, 93);
  for (auto& v : w) v += 1.0f;
  std::vector<double> x(N * H * D), dyd(N * H * D), y_ref(N * H * D), dx_ref(N * H * D), dw_ref(D, 0.0);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t i = 0; i < H * D; ++i) {
      x[n * H * D + i] = buf[n * stride + off + i];
      dyd[n * H * D + i] = dy[n * stride + off + i];
    }
  auto wd = to_f64(w);
  ref::rmsnorm_fwd(x.data(), wd.data(), y_ref.data(), N * H, D, 1e-6);
  ref::rmsnorm_bwd(dyd.data(), x.data(), wd.data(), dx_ref.data(), dw_ref.data(), N * H, D, 1e-6);
  for_each_isa([&](Isa) {
    auto y = buf, dx = buf;
    std::vector<float> rstd(N * H), dw(D, 0.f), yc(N * H * D), dxc(N * H * D);
    rmsnorm_heads_fwd(buf.data() + off, w.data(), y.data() + off, rstd.data(), N, H, D, stride, 1e-6f);
    rmsnorm_heads_bwd(dy.data() + off, buf.data() + off, w.data(), rstd.data(), dx.data() + off, dw.data(), N, H, D, stride);
    for (int64_t n = 0; n < N; ++n) {
      for (int64_t i = 0; i < H * D; ++i) {
        yc[n * H * D + i] = y[n * stride + off + i];
        dxc[n * H * D + i] = dx[n * stride + off + i];
      }
      EXPECT_EQ(y[n * stride + 5], buf[n * stride + 5]);  // outside the heads: untouched
    }
    EXPECT_TRUE(all_close(yc, y_ref, tolerance(Kind::reduction, D)));
    EXPECT_TRUE(all_close(dxc, dx_ref, tolerance(Kind::reduction, D), 1e-6));
    EXPECT_TRUE(all_close(dw, dw_ref, tolerance(Kind::reduction, N * H)));
    // In place (dx aliasing dy), as the model calls it: same dx and dw.
    auto inplace = dy;
    std::vector<float> dw2(D, 0.f);
    rmsnorm_heads_bwd(inplace.data() + off, buf.data() + off, w.data(), rstd.data(), inplace.data() + off, dw2.data(), N,
                      H, D, stride);
    for (int64_t n = 0; n < N; ++n)
      for (int64_t i = 0; i < H * D; ++i) EXPECT_EQ(inplace[n * stride + off + i], dx[n * stride + off + i]);
    EXPECT_EQ(dw2, dw);
  });
}

TEST(OpBias, AddAndGrad) {
  int64_t N = 130, M = 19;
  auto y = random_vec(N * M, 94), b = random_vec(M, 95), dy = random_vec(N * M, 96);
  auto y0 = y;
  std::vector<float> db(M, 1.0f);
  bias_add(y.data(), b.data(), N, M);
  bias_grad(dy.data(), db.data(), N, M);
  std::vector<double> db_ref(M, 1.0);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t m = 0; m < M; ++m) {
      EXPECT_EQ(y[n * M + m], y0[n * M + m] + b[m]);
      db_ref[m] += dy[n * M + m];
    }
  EXPECT_TRUE(all_close(db, db_ref, tolerance(Kind::reduction, N)));
}
