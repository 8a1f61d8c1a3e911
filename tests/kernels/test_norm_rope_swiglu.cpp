// Harness entries for the elementwise/row ops: RMSNorm, RoPE, SwiGLU, embedding.
#include "common/op_harness.h"
#include "temper/core/error.h"
#include "common/tolerance.h"
#include "temper/kernels/bias.h"
#include "temper/kernels/embedding.h"
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
