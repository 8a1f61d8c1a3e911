// Harness entries for the elementwise/row ops: RMSNorm, RoPE, SwiGLU, embedding.
#include "common/op_harness.h"
#include "temper/core/error.h"
#include "common/tolerance.h"
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
  for (int64_t n : {1, 15, 16, 1000, 40001}) {
    auto g = random_vec(n, 31, 3.0f), u = random_vec(n, 32), dh = random_vec(n, 33);
    auto gd = to_f64(g), ud = to_f64(u), dhd = to_f64(dh);
    std::vector<double> h_ref(n), dg_ref(n), du_ref(n);
    ref::swiglu_fwd(gd.data(), ud.data(), h_ref.data(), n);
    ref::swiglu_bwd(gd.data(), ud.data(), dhd.data(), dg_ref.data(), du_ref.data(), n);
    auto loss = [&] {
      std::vector<double> h(n);
      ref::swiglu_fwd(gd.data(), ud.data(), h.data(), n);
      double s = 0;
      for (int64_t i = 0; i < n; ++i) s += h[i] * dhd[i];
      return s;
    };
    EXPECT_TRUE(fd_check(gd, dg_ref, loss));
    EXPECT_TRUE(fd_check(ud, du_ref, loss));
    for_each_isa([&](Isa) {
      std::vector<float> h(n), dg(n), du(n);
      swiglu_fwd(g.data(), u.data(), h.data(), n);
      swiglu_bwd(g.data(), u.data(), dh.data(), dg.data(), du.data(), n);
      EXPECT_TRUE(all_close(h, h_ref, tolerance(Kind::elementwise, 1, 4.0)));
      EXPECT_TRUE(all_close(dg, dg_ref, tolerance(Kind::elementwise, 1, 4.0)));
      EXPECT_TRUE(all_close(du, du_ref, tolerance(Kind::elementwise, 1, 4.0)));
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
