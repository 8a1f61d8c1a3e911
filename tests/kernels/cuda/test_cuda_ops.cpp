// The op harness on the CUDA backend: every device kernel against the CPU kernel (itself checked
// against the fp64 reference and finite differences in tests/kernels) on shapes that are not
// multiples of the warp or tile sizes, with the tolerance table of tests/common/tolerance.h.
// Skips cleanly where no GPU is present (a build machine); scripts/gpu-check runs it on a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "common/op_harness.h"
#include "common/tolerance.h"
#include "temper/core/dtype.h"
#include "temper/core/error.h"
#include "temper/core/rng.h"
#include "temper/kernels/adamw.h"
#include "temper/kernels/attention.h"
#include "temper/kernels/classifier.h"
#include "temper/kernels/cuda/attention.h"
#include "temper/kernels/cuda/classifier.h"
#include "temper/kernels/cuda/gemm.h"
#include "temper/kernels/cuda/gemv.h"
#include "temper/kernels/cuda/int4_matmul.h"
#include "temper/kernels/cuda/ops.h"
#include "temper/kernels/cuda/runtime.h"
#include "temper/kernels/cuda/sampling.h"
#include "temper/kernels/embedding.h"
#include "temper/kernels/geglu.h"
#include "temper/kernels/int4_matmul.h"
#include "temper/kernels/paged_attention.h"
#include "temper/kernels/rmsnorm.h"
#include "temper/kernels/rope.h"
#include "temper/kernels/swiglu.h"
#include "temper/rollout/sampler.h"

namespace temper {
namespace {

using test::Kind;
using test::all_close;
using test::random_vec;
using test::tolerance;

class CudaOps : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cuda::available()) GTEST_SKIP() << "no CUDA device on this machine (scripts/gpu-check runs these on a GPU)";
  }
};

template <class T>
cuda::DeviceBuffer<T> up(const std::vector<T>& v) {
  cuda::DeviceBuffer<T> d(v.size());
  cuda::copy_to_device(d.data(), v.data(), v.size() * sizeof(T));
  return d;
}
template <class T>
std::vector<T> down(const cuda::DeviceBuffer<T>& d) {
  std::vector<T> v(d.size());
  cuda::copy_to_host(v.data(), d.data(), d.size() * sizeof(T));
  return v;
}
std::vector<uint16_t> to_bf16(const std::vector<float>& v) {
  std::vector<uint16_t> o(v.size());
  for (size_t i = 0; i < v.size(); ++i) o[i] = f32_to_bf16(v[i]);
  return o;
}
std::vector<float> round_bf16(const std::vector<float>& v) {
  std::vector<float> o(v.size());
  for (size_t i = 0; i < v.size(); ++i) o[i] = bf16_to_f32(f32_to_bf16(v[i]));
  return o;
}

// C[M, N] = op(A) op(B) (+ beta C + bias) in double, row-major as gemm.h.
std::vector<double> gemm_ref(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const std::vector<float>& A, int64_t lda,
                             const std::vector<float>& B, int64_t ldb, const std::vector<float>& C0, int64_t ldc,
                             float beta, const std::vector<float>* bias) {
  std::vector<double> C(static_cast<size_t>(M * ldc));
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      double acc = 0;
      for (int64_t k = 0; k < K; ++k) {
        double a = ta ? A[k * lda + m] : A[m * lda + k];
        double b = tb ? B[n * ldb + k] : B[k * ldb + n];
        acc += a * b;
      }
      acc += beta * C0[m * ldc + n] + (bias ? (*bias)[n] : 0.0);
      C[m * ldc + n] = acc;
    }
  return C;
}

TEST_F(CudaOps, GemmEveryOrientationF32AndBf16) {
  cuda::Blas blas;
  const int64_t M = 37, N = 72, K = 104;  // bf16 strides must be multiples of 8
  for (int orient = 0; orient < 3; ++orient) {
    const bool ta = orient == 2, tb = orient == 0;
    SCOPED_TRACE("orientation " + std::to_string(orient));
    const int64_t lda = ta ? M + 3 : K + 8, ldb = tb ? K + 8 : N + 8, ldc = N + 5;
    auto A = random_vec((ta ? K : M) * lda, 1), B = random_vec((tb ? N : K) * ldb, 2), C0 = random_vec(M * ldc, 3);
    auto bias = random_vec(N, 4);
    for (bool bf16 : {false, true}) {
      for (bool with_bias : {false, true}) {
        auto a_used = bf16 ? round_bf16(A) : A, b_used = bf16 ? round_bf16(B) : B;
        float beta = with_bias ? 0.f : 0.5f;
        auto want = gemm_ref(ta, tb, M, N, K, a_used, lda, b_used, ldb, C0, ldc, beta, with_bias ? &bias : nullptr);
        cuda::DeviceBuffer<float> dA32, dB32;
        cuda::DeviceBuffer<uint16_t> dA16, dB16;
        if (bf16) {
          dA16 = up(to_bf16(A));
          dB16 = up(to_bf16(B));
        } else {
          dA32 = up(A);
          dB32 = up(B);
        }
        auto dC = up(C0);
        auto dbias = up(bias);
        cuda::GemmArgs g;
        g.trans_a = ta;
        g.trans_b = tb;
        g.M = M;
        g.N = N;
        g.K = K;
        g.A = bf16 ? static_cast<const void*>(dA16.data()) : dA32.data();
        g.lda = lda;
        g.B = bf16 ? static_cast<const void*>(dB16.data()) : dB32.data();
        g.ldb = ldb;
        g.C = dC.data();
        g.ldc = ldc;
        g.ab_type = bf16 ? cuda::GemmType::bf16 : cuda::GemmType::f32;
        g.beta = beta;
        g.bias = with_bias ? dbias.data() : nullptr;
        blas.gemm(g);
        auto got = down(dC);
        std::vector<double> got_rows, want_rows;
        for (int64_t m = 0; m < M; ++m)
          for (int64_t n = 0; n < N; ++n) {
            got_rows.push_back(got[m * ldc + n]);
            want_rows.push_back(want[m * ldc + n]);
          }
        EXPECT_TRUE(all_close(got_rows, want_rows, tolerance(Kind::reduction, K))) << "bf16 " << bf16 << " bias " << with_bias;
      }
    }
  }
  // a bf16 output
  auto A = random_vec(16 * 64, 5), B = random_vec(24 * 64, 6);
  auto dA = up(to_bf16(A)), dB = up(to_bf16(B));
  cuda::DeviceBuffer<uint16_t> dC(16 * 24);
  cuda::GemmArgs g;
  g.M = 16;
  g.N = 24;
  g.K = 64;
  g.A = dA.data();
  g.lda = 64;
  g.B = dB.data();
  g.ldb = 64;
  g.C = dC.data();
  g.ldc = 24;
  g.c_type = cuda::GemmType::bf16;
  blas.gemm(g);
  auto got16 = down(dC);
  std::vector<float> got(got16.size());
  for (size_t i = 0; i < got.size(); ++i) got[i] = bf16_to_f32(got16[i]);
  auto want = gemm_ref(false, true, 16, 24, 64, round_bf16(A), 64, round_bf16(B), 64, std::vector<float>(16 * 24), 24, 0.f, nullptr);
  EXPECT_TRUE(all_close(got, want, tolerance(Kind::bf16, 64)));
}

// The residual form of the model's o and down projections: C = A W^T + C_in with C_in another
// buffer (left unchanged), equal to the in-place product on a copy of C_in.
TEST_F(CudaOps, GemmAddsAnAddendFromAnotherBuffer) {
  cuda::Blas blas;
  const int64_t M = 3, N = 40, K = 64;
  auto A = random_vec(M * K, 7), W = random_vec(N * K, 8), R = random_vec(M * N, 9);
  auto dA = up(to_bf16(A)), dW = up(to_bf16(W));
  auto dR = up(R), dOut = up(std::vector<float>(M * N, 123.f)), dInPlace = up(R);
  cuda::GemmArgs g = cuda::gemm_args(false, true, M, N, K, dA.data(), K, dW.data(), K, 1.f, dOut.data(), N);
  g.C_in = dR.data();
  blas.gemm(g);
  cuda::GemmArgs h = cuda::gemm_args(false, true, M, N, K, dA.data(), K, dW.data(), K, 1.f, dInPlace.data(), N);
  blas.gemm(h);
  auto want = gemm_ref(false, true, M, N, K, round_bf16(A), K, round_bf16(W), K, R, N, 1.f, nullptr);
  EXPECT_TRUE(all_close(down(dOut), want, tolerance(Kind::reduction, K)));
  EXPECT_TRUE(all_close(down(dOut), down(dInPlace), tolerance(Kind::reduction, K)));
  EXPECT_EQ(down(dR), R);  // the addend is read, not written
}

// The decode-sized product at every row count it takes, with and without bias and addend, against
// the CPU's product of the same bf16 values; K with a partial last sweep of the warp (K / 8 = 45).
TEST_F(CudaOps, GemvMatchesTheProductAtEveryRowCount) {
  const int64_t N = 37, K = 360;
  auto W = random_vec(N * K, 31), bias = random_vec(N, 32);
  auto dW = up(to_bf16(W));
  auto dbias = up(bias);
  for (int64_t M = 1; M <= cuda::kGemvMaxRows; ++M) {
    SCOPED_TRACE("M " + std::to_string(M));
    auto X = random_vec(M * K, 33 + static_cast<uint64_t>(M)), R = random_vec(M * N, 50 + static_cast<uint64_t>(M));
    auto dX = up(to_bf16(X));
    auto dR = up(R);
    ASSERT_TRUE(cuda::gemv_fits(M, K, dX.data(), dW.data()));
    cuda::DeviceBuffer<float> dY(M * N);
    cuda::gemv_bf16(M, N, K, dX.data(), dW.data(), nullptr, 0.f, nullptr, dY.data(), nullptr);
    auto want =
        gemm_ref(false, true, M, N, K, round_bf16(X), K, round_bf16(W), K, std::vector<float>(M * N), N, 0.f, nullptr);
    EXPECT_TRUE(all_close(down(dY), want, tolerance(Kind::reduction, K)));
    cuda::gemv_bf16(M, N, K, dX.data(), dW.data(), dbias.data(), 1.f, dR.data(), dY.data(), nullptr);
    want = gemm_ref(false, true, M, N, K, round_bf16(X), K, round_bf16(W), K, R, N, 1.f, &bias);
    EXPECT_TRUE(all_close(down(dY), want, tolerance(Kind::reduction, K)));
    auto dY2 = up(R);  // in place: the addend is y itself
    cuda::gemv_bf16(M, N, K, dX.data(), dW.data(), nullptr, 0.5f, nullptr, dY2.data(), nullptr);
    want = gemm_ref(false, true, M, N, K, round_bf16(X), K, round_bf16(W), K, R, N, 0.5f, nullptr);
    EXPECT_TRUE(all_close(down(dY2), want, tolerance(Kind::reduction, K)));
  }
  EXPECT_FALSE(cuda::gemv_fits(cuda::kGemvMaxRows + 1, K, dW.data(), dW.data()));
  EXPECT_FALSE(cuda::gemv_fits(1, 20, dW.data(), dW.data()));  // K not a multiple of 8
  EXPECT_THROW(cuda::gemv_bf16(1, N, 20, dW.data(), dW.data(), nullptr, 0.f, nullptr, nullptr, nullptr), Error);
}

TEST_F(CudaOps, RmsNormForwardBackwardF32AndBf16) {
  // 3 row chunks, the last partial; rows narrower and wider than the 256 threads of a row
  for (int64_t C : {int64_t{300}, int64_t{1500}}) {
    SCOPED_TRACE("C " + std::to_string(C));
    const int64_t N = 301;
    auto x = random_vec(N * C, 11), w = random_vec(C, 12), dy = random_vec(N * C, 13);
    std::vector<float> y(N * C), rstd(N), dx(N * C), dw(C, 0.5f);
    kernels::rmsnorm_fwd(x.data(), w.data(), y.data(), rstd.data(), N, C, 1e-6f);
    kernels::rmsnorm_bwd(dy.data(), x.data(), w.data(), rstd.data(), dx.data(), dw.data(), N, C);
    auto dx_ = up(x), dw_ = up(w), ddy = up(dy);
    cuda::DeviceBuffer<float> dyo(N * C), drstd(N), ddx(N * C);
    auto ddw = up(std::vector<float>(C, 0.5f));
    cuda::rmsnorm_fwd(dx_.data(), dw_.data(), dyo.data(), drstd.data(), N, C, 1e-6f, nullptr);
    cuda::DeviceBuffer<float> ws(cuda::column_workspace(N, C));
    cuda::rmsnorm_bwd(ddy.data(), dx_.data(), dw_.data(), drstd.data(), ddx.data(), ddw.data(), N, C, false, ws.data(),
                      nullptr);
    EXPECT_TRUE(all_close(down(dyo), y, tolerance(Kind::reduction, C)));
    EXPECT_TRUE(all_close(down(drstd), rstd, tolerance(Kind::reduction, C)));
    EXPECT_TRUE(all_close(down(ddx), dx, tolerance(Kind::reduction, C)));
    EXPECT_TRUE(all_close(down(ddw), dw, tolerance(Kind::reduction, N)));
    // bf16 activations: the CPU kernel on the rounded input, output rounded.
    auto xr = round_bf16(x);
    kernels::rmsnorm_fwd(xr.data(), w.data(), y.data(), rstd.data(), N, C, 1e-6f);
    auto dx16 = up(to_bf16(x));
    cuda::DeviceBuffer<uint16_t> dy16(N * C);
    cuda::rmsnorm_fwd(dx16.data(), dw_.data(), dy16.data(), drstd.data(), N, C, 1e-6f, nullptr);
    auto got16 = down(dy16);
    std::vector<float> got(got16.size());
    for (size_t i = 0; i < got.size(); ++i) got[i] = bf16_to_f32(got16[i]);
    EXPECT_TRUE(all_close(got, y, tolerance(Kind::bf16)));
  }
}

TEST_F(CudaOps, ColumnSumsOverRowChunksAreTheBiasGradient) {
  const int64_t N = 300, C = 65, ld = 70;
  auto x = random_vec(N * ld, 14);
  std::vector<double> want(C, 0.5);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c) want[c] += x[n * ld + c];
  auto dx = up(x);
  auto dout = up(std::vector<float>(C, 0.5f));
  cuda::DeviceBuffer<float> ws(cuda::column_workspace(N, C));
  cuda::column_sum_add(dx.data(), N, C, ld, dout.data(), ws.data(), nullptr);
  EXPECT_TRUE(all_close(down(dout), want, tolerance(Kind::reduction, N)));
}

TEST_F(CudaOps, RopeForwardAndInverseMatchTheCpu) {
  const int64_t rows = 29, H = 3, D = 48, stride = H * D + 16, max_pos = 64;
  auto table = kernels::rope_table(max_pos, D, 10000.0);
  std::vector<int32_t> pos(rows);
  for (int64_t r = 0; r < rows; ++r) pos[r] = static_cast<int32_t>((r * 7) % max_pos);
  auto x = random_vec(rows * stride, 21);
  auto want = x;
  kernels::rope_fwd(want.data(), pos.data(), table, rows, H, D, stride);
  auto dx = up(x);
  auto dpos = up(pos);
  auto dcos = up(table.cos), dsin = up(table.sin);
  cuda::rope_fwd(dx.data(), dpos.data(), dcos.data(), dsin.data(), rows, H, D, stride, nullptr);
  EXPECT_TRUE(all_close(down(dx), want, tolerance(Kind::elementwise, 1, 4)));
  auto back = want;
  kernels::rope_bwd(back.data(), pos.data(), table, rows, H, D, stride);
  cuda::rope_bwd(dx.data(), dpos.data(), dcos.data(), dsin.data(), rows, H, D, stride, nullptr);
  EXPECT_TRUE(all_close(down(dx), back, tolerance(Kind::elementwise, 1, 4)));
}

// The paged forward's fused pass equals the four launches it replaced (rope on q and k, bf16
// rounding of k and v, the cache write), on rows of different sequences at scattered positions.
TEST_F(CudaOps, FusedRopeAndCacheWriteEqualsTheSeparatePasses) {
  const int64_t n = 5, H = 6, Hkv = 2, D = 64, Hq = H * D, Hk = Hkv * D, ld = Hq + 2 * Hk + 8, max_pos = 80;
  const int64_t bs = 4, blocks = 48, table_stride = 20;
  auto table = kernels::rope_table(max_pos, D, 1000000.0);
  std::vector<int32_t> pos = {0, 5, 17, 79, 33};
  std::vector<int32_t> tables(static_cast<size_t>(n * table_stride));
  for (size_t i = 0; i < tables.size(); ++i) tables[i] = static_cast<int32_t>((i * 13 + 5) % blocks);  // scattered
  auto x = random_vec(n * ld, 23, 3.0f);
  auto dpos = up(pos), dtab = up(tables);
  auto dcos = up(table.cos), dsin = up(table.sin);
  auto x_ref = up(x), x_got = up(x);
  std::vector<float> zeros(static_cast<size_t>(blocks * bs * Hk), 0.f);
  auto kp_ref = up(zeros), vp_ref = up(zeros), kp_got = up(zeros), vp_got = up(zeros);
  cuda::rope_fwd(x_ref.data(), dpos.data(), dcos.data(), dsin.data(), n, H, D, ld, nullptr);
  cuda::rope_fwd(x_ref.data() + Hq, dpos.data(), dcos.data(), dsin.data(), n, Hkv, D, ld, nullptr);
  cuda::round_bf16_rows(x_ref.data() + Hq, n, 2 * Hk, ld, nullptr);
  cuda::kv_write(x_ref.data() + Hq, x_ref.data() + Hq + Hk, ld, dpos.data(), dtab.data(), table_stride, n, Hk, bs,
                 kp_ref.data(), vp_ref.data(), nullptr);
  cuda::rope_kv_write(x_got.data(), ld, dpos.data(), dcos.data(), dsin.data(), n, H, Hkv, D, dtab.data(), table_stride,
                      bs, kp_got.data(), vp_got.data(), nullptr);
  // Same rotation code, same rounding: equal to the bit (the padding columns untouched in both).
  EXPECT_EQ(down(x_got), down(x_ref));
  EXPECT_EQ(down(kp_got), down(kp_ref));
  EXPECT_EQ(down(vp_got), down(vp_ref));
  auto kp = down(kp_got);
  EXPECT_GT(std::count_if(kp.begin(), kp.end(), [](float v) { return v != 0.f; }), n * Hk / 2);  // it wrote
}

TEST_F(CudaOps, SwigluForwardBackwardMatchTheCpu) {
  const int64_t N = 23, F = 77;
  auto gu = random_vec(N * 2 * F, 31), dh = random_vec(N * F, 32);
  std::vector<float> h(N * F), dgu(N * 2 * F);
  kernels::swiglu_fwd(gu.data(), h.data(), N, F);
  kernels::swiglu_bwd(gu.data(), dh.data(), dgu.data(), N, F);
  auto dgu_in = up(gu), ddh = up(dh);
  cuda::DeviceBuffer<float> dh_out(N * F), ddgu(N * 2 * F);
  cuda::swiglu_fwd(dgu_in.data(), dh_out.data(), N, F, nullptr);
  cuda::swiglu_bwd(dgu_in.data(), ddh.data(), ddgu.data(), N, F, nullptr);
  EXPECT_TRUE(all_close(down(dh_out), h, tolerance(Kind::elementwise, 1, 4)));
  EXPECT_TRUE(all_close(down(ddgu), dgu, tolerance(Kind::elementwise, 1, 4)));
}

TEST_F(CudaOps, GegluForwardBackwardMatchTheCpu) {
  const int64_t N = 23, F = 77;
  auto gu = random_vec(N * 2 * F, 33, 2.f), dh = random_vec(N * F, 34);
  std::vector<float> h(N * F), dgu(N * 2 * F);
  kernels::geglu_fwd(gu.data(), h.data(), N, F);
  kernels::geglu_bwd(gu.data(), dh.data(), dgu.data(), N, F);
  auto d_gu = up(gu), d_dh = up(dh);
  cuda::DeviceBuffer<float> d_h(N * F), d_dgu(N * 2 * F);
  cuda::geglu_fwd(d_gu.data(), d_h.data(), N, F, nullptr);
  cuda::geglu_bwd(d_gu.data(), d_dh.data(), d_dgu.data(), N, F, nullptr);
  EXPECT_TRUE(all_close(down(d_h), h, tolerance(Kind::elementwise, 1, 4)));
  EXPECT_TRUE(all_close(down(d_dgu), dgu, tolerance(Kind::elementwise, 1, 4)));
  // bf16 output of f32 input: the f32 result rounded once; bf16 input and output: bf16 tolerance.
  auto widen = [](const std::vector<uint16_t>& v) {
    std::vector<float> o(v.size());
    for (size_t i = 0; i < v.size(); ++i) o[i] = bf16_to_f32(v[i]);
    return o;
  };
  cuda::DeviceBuffer<uint16_t> d_h16(N * F);
  cuda::geglu_fwd(d_gu.data(), d_h16.data(), N, F, nullptr);
  EXPECT_TRUE(all_close(widen(down(d_h16)), h, tolerance(Kind::bf16)));
  auto d_gu16 = up(to_bf16(gu));
  cuda::geglu_fwd(d_gu16.data(), d_h16.data(), N, F, nullptr);
  std::vector<float> h_of16(N * F);
  const auto gu_r = round_bf16(gu);
  kernels::geglu_fwd(gu_r.data(), h_of16.data(), N, F);
  EXPECT_TRUE(all_close(widen(down(d_h16)), h_of16, tolerance(Kind::bf16)));
}

TEST_F(CudaOps, EmbeddingGatherAndScatterInTokenOrder) {
  const int64_t N = 41, V = 13, C = 70;
  std::vector<int32_t> ids(N);
  for (int64_t n = 0; n < N; ++n) ids[n] = static_cast<int32_t>((n * 5) % V);  // repeated ids
  auto table = random_vec(V * C, 41), dout = random_vec(N * C, 42);
  std::vector<float> out(N * C), dtable(V * C, 0.25f);
  kernels::embedding_fwd(table.data(), ids.data(), out.data(), N, V, C);
  kernels::embedding_bwd(dout.data(), ids.data(), dtable.data(), N, C);
  auto dt = up(table), dd = up(dout);
  auto dids = up(ids);
  cuda::DeviceBuffer<float> dout_f(N * C);
  auto ddt = up(std::vector<float>(V * C, 0.25f));
  cuda::DeviceBuffer<int> bad(1);
  TEMPER_CUDA_CHECK(cudaMemset(bad.data(), 0, sizeof(int)));
  cuda::embedding_fwd(dt.data(), dids.data(), dout_f.data(), N, V, C, bad.data(), nullptr);
  cuda::embedding_bwd(dd.data(), dids.data(), ddt.data(), N, C, nullptr);
  EXPECT_EQ(down(dout_f), out);
  EXPECT_EQ(down(ddt), dtable);  // same order of additions: the same bits
  EXPECT_EQ(down(bad)[0], 0);
  ids[3] = static_cast<int32_t>(V);
  auto dbad_ids = up(ids);
  cuda::embedding_fwd(dt.data(), dbad_ids.data(), dout_f.data(), N, V, C, bad.data(), nullptr);
  EXPECT_EQ(down(bad)[0], 1);
}

TEST_F(CudaOps, AdamWStepsAndGradNormMatchTheCpu) {
  const int64_t n = 50000;
  auto p = random_vec(n, 51), m0 = std::vector<float>(n, 0.f), v0 = std::vector<float>(n, 0.f);
  auto pc = p, mc = m0, vc = v0;
  auto dp = up(p), dm = up(m0), dv = up(v0);
  cuda::DeviceBuffer<uint16_t> p16(n);
  kernels::AdamWConfig c;
  for (int64_t step = 1; step <= 3; ++step) {
    auto g = random_vec(n, 60 + step);
    // step 3 clipped: the CPU on gradients scaled in place, the device scaling inside its pass
    const float gs = step == 3 ? 0.25f : 1.f;
    auto g_scaled = g;
    for (float& x : g_scaled) x *= gs;
    kernels::adamw_step(pc.data(), g_scaled.data(), mc.data(), vc.data(), n, c, 1e-3f, step);
    auto dg = up(g);
    cuda::adamw_step(dp.data(), dg.data(), dm.data(), dv.data(), n, 1e-3f, c.beta1, c.beta2, c.eps, c.weight_decay,
                     step, p16.data(), nullptr, gs);
    if (step == 3) {
      EXPECT_EQ(down(dg), g);  // the gradient itself is left as it is
    }
  }
  auto got = down(dp);
  EXPECT_TRUE(all_close(got, pc, tolerance(Kind::elementwise, 1, 8)));
  EXPECT_TRUE(all_close(down(dm), mc, tolerance(Kind::elementwise, 1, 8)));
  EXPECT_TRUE(all_close(down(dv), vc, tolerance(Kind::elementwise, 1, 8)));
  auto got16 = down(p16);
  for (int64_t i = 0; i < n; i += 997) EXPECT_EQ(got16[i], f32_to_bf16(got[i])) << i;
  auto g = random_vec(n, 70);
  auto dg = up(g);
  cuda::DeviceBuffer<double> ws(cuda::grad_norm_workspace(n)), out(1);
  cuda::grad_sumsq(dg.data(), n, ws.data(), out.data(), nullptr);
  const double norm = kernels::grad_norm(g.data(), n);
  EXPECT_NEAR(std::sqrt(down(out)[0]), norm, 1e-7 * norm);  // the CPU sums 1024-float blocks in float
}

struct AttnCase {
  int64_t B, T, H, Hkv, D;
};

TEST_F(CudaOps, FlashAttentionForwardBackwardMatchTheCpu) {
  // T not a multiple of the 32-row blocks; Qwen2.5-0.5B's heads over 200 tokens; D of 32, 64, 128, 200
  // (up to 8 channels per lane); a KV row stride that is not a multiple of 4 (the scalar tile loads).
  for (AttnCase c : {AttnCase{2, 70, 4, 2, 32}, AttnCase{1, 45, 6, 6, 64}, AttnCase{2, 33, 2, 1, 128},
                     AttnCase{1, 200, 14, 2, 64}, AttnCase{1, 40, 3, 1, 200}, AttnCase{1, 37, 3, 3, 18}}) {
    SCOPED_TRACE("T " + std::to_string(c.T) + " D " + std::to_string(c.D));
    // fused-QKV layout: q, k, v are column blocks of one [B*T, (H + 2 Hkv) D] buffer
    const int64_t qkv = (c.H + 2 * c.Hkv) * c.D, rows = c.B * c.T;
    kernels::AttnShape s{c.B, c.T, c.H, c.Hkv, c.D, qkv, qkv, c.H * c.D};
    auto buf = random_vec(rows * qkv, 81), dout = random_vec(rows * c.H * c.D, 82);
    const float* q = buf.data();
    const float* k = buf.data() + c.H * c.D;
    const float* v = k + c.Hkv * c.D;
    std::vector<float> o(rows * c.H * c.D), lse(c.B * c.H * c.T), dbuf(rows * qkv, 0.f);
    kernels::attention_fwd(s, q, k, v, o.data(), lse.data());
    kernels::attention_bwd(s, q, k, v, o.data(), lse.data(), dout.data(), dbuf.data(), dbuf.data() + c.H * c.D,
                           dbuf.data() + (c.H + c.Hkv) * c.D);
    auto dq = up(buf), ddo = up(dout);
    cuda::DeviceBuffer<float> d_o(o.size()), d_lse(lse.size()), d_delta(lse.size());
    auto d_grad = up(std::vector<float>(rows * qkv, 0.f));
    cuda::attention_fwd(s, dq.data(), dq.data() + c.H * c.D, dq.data() + (c.H + c.Hkv) * c.D, d_o.data(), d_lse.data(),
                        nullptr);
    EXPECT_TRUE(all_close(down(d_o), o, tolerance(Kind::reduction, c.T)));
    EXPECT_TRUE(all_close(down(d_lse), lse, tolerance(Kind::reduction, c.T)));
    cuda::attention_bwd(s, dq.data(), dq.data() + c.H * c.D, dq.data() + (c.H + c.Hkv) * c.D, d_o.data(), d_lse.data(),
                        ddo.data(), d_grad.data(), d_grad.data() + c.H * c.D, d_grad.data() + (c.H + c.Hkv) * c.D,
                        d_delta.data(), nullptr);
    EXPECT_TRUE(all_close(down(d_grad), dbuf, tolerance(Kind::reduction, c.T * c.D)));
    // The dK/dV pass per query head with the ordered sum over each group (the model's path).
    cuda::DeviceBuffer<float> ws(static_cast<size_t>(std::max<int64_t>(1, cuda::attention_bwd_workspace_floats(s))));
    auto d_grad2 = up(std::vector<float>(rows * qkv, 0.f));
    cuda::attention_bwd(s, dq.data(), dq.data() + c.H * c.D, dq.data() + (c.H + c.Hkv) * c.D, d_o.data(), d_lse.data(),
                        ddo.data(), d_grad2.data(), d_grad2.data() + c.H * c.D, d_grad2.data() + (c.H + c.Hkv) * c.D,
                        d_delta.data(), nullptr, ws.data());
    EXPECT_TRUE(all_close(down(d_grad2), dbuf, tolerance(Kind::reduction, c.T * c.D)));
  }
}

// Paged attention of n query rows over scattered KV blocks, on the CPU (the reference) and the
// device: the one-warp kernel (no workspace), then the split kernel (workspace; splits of 32 positions
// up to 32 of them, so long rows span many splits and the merge), each with f32 and bf16 output.
void check_paged_attention(int64_t H, int64_t Hkv, int64_t D, int64_t bs, int64_t table_stride,
                           std::vector<int64_t> len, uint64_t seed) {
  const int64_t n = static_cast<int64_t>(len.size()), blocks = n * table_stride + 3, row_floats = Hkv * D;
  auto kp = random_vec(blocks * bs * row_floats, seed), vp = random_vec(blocks * bs * row_floats, seed + 1);
  auto q = random_vec(n * H * D, seed + 2, 2.0f);
  std::vector<int32_t> tables(n * table_stride);
  for (int64_t i = 0; i < n * table_stride; ++i) tables[i] = static_cast<int32_t>((i * 7 + 3) % blocks);
  std::vector<const int32_t*> table_ptrs(n);
  for (int64_t i = 0; i < n; ++i) table_ptrs[i] = tables.data() + i * table_stride;
  std::vector<float> o(n * H * D);
  kernels::PagedAttnArgs a;
  a.n = n;
  a.H = H;
  a.Hkv = Hkv;
  a.D = D;
  a.q = q.data();
  a.q_stride = H * D;
  a.o = o.data();
  a.o_stride = H * D;
  a.block_tables = table_ptrs.data();
  a.kv_len = len.data();
  a.k_pool = kp.data();
  a.v_pool = vp.data();
  a.block_size = bs;
  kernels::paged_attention_fwd(a);
  std::vector<int32_t> len32(len.begin(), len.end());
  auto dk = up(kp), dv = up(vp), dq = up(q);
  auto dt = up(tables), dl = up(len32);
  const int64_t max_len = table_stride * bs;
  cuda::DeviceBuffer<float> ws(static_cast<size_t>(cuda::paged_attention_workspace_floats(n, H, D, max_len)));
  for (bool split : {false, true}) {
    SCOPED_TRACE(split ? "split kernel" : "one-warp kernel");
    cuda::DeviceBuffer<float> d_o(o.size());
    cuda::PagedAttnDeviceArgs b;
    b.n = n;
    b.H = H;
    b.Hkv = Hkv;
    b.D = D;
    b.q = dq.data();
    b.q_stride = H * D;
    b.o = d_o.data();
    b.o_stride = H * D;
    b.block_tables = dt.data();
    b.table_stride = table_stride;
    b.kv_len = dl.data();
    b.k_pool = dk.data();
    b.v_pool = dv.data();
    b.block_size = bs;
    if (split) {
      b.max_len = max_len;
      b.workspace = ws.data();
      b.workspace_floats = static_cast<int64_t>(ws.size());
    }
    cuda::paged_attention_fwd(b, nullptr);
    EXPECT_TRUE(all_close(down(d_o), o, tolerance(Kind::reduction, D)));
    // The bf16 output alone (the decode path's): the same values rounded to nearest even.
    cuda::DeviceBuffer<uint16_t> d_o16(o.size());
    auto f32_out = down(d_o);
    b.o = nullptr;
    b.o16 = d_o16.data();
    cuda::paged_attention_fwd(b, nullptr);
    auto got16 = down(d_o16);
    for (size_t i = 0; i < got16.size(); ++i) ASSERT_EQ(got16[i], f32_to_bf16(f32_out[i])) << "at " << i;
    b.o16 = nullptr;
    EXPECT_THROW(cuda::paged_attention_fwd(b, nullptr), Error);  // no output at all
    if (split) {
      b.o = d_o.data();
      b.workspace_floats = 16;  // too small: refused, not overrun
      EXPECT_THROW(cuda::paged_attention_fwd(b, nullptr), Error);
    }
  }
}

TEST_F(CudaOps, PagedAttentionOverScatteredBlocksMatchesTheCpu) {
  check_paged_attention(4, 2, 64, 16, 4, {1, 17, 40, 64, 33}, 91);
}

// Qwen2.5-0.5B's heads (7 query heads per KV head, D 64) at rollout lengths: rows span up to 19 splits.
TEST_F(CudaOps, PagedAttentionSplitsLongRowsAndMergesThem) {
  check_paged_attention(14, 2, 64, 16, 40, {600, 1, 31, 33, 257, 640, 0}, 95);
  check_paged_attention(9, 3, 64, 16, 70, {1100, 5}, 97);  // SmolLM2's heads; 1120 positions: splits of 64
  check_paged_attention(2, 1, 36, 8, 5, {39, 2}, 99);      // D not a multiple of 32
}

// ---- Score options (kernels::AttnOpts): the device kernels against the CPU's (tests/kernels checks
// those against the fp64 reference and finite differences).

kernels::AttnOpts attn_opts(float scale, float softcap, int64_t window) {
  kernels::AttnOpts o;
  o.scale = scale, o.softcap = softcap, o.window = window;
  return o;
}

void check_flash_attention_opts(const AttnCase& c, const kernels::AttnOpts& opt) {
  SCOPED_TRACE("T " + std::to_string(c.T) + " D " + std::to_string(c.D) + " scale " + std::to_string(opt.scale) +
               " softcap " + std::to_string(opt.softcap) + " window " + std::to_string(opt.window));
  const int64_t qkv = (c.H + 2 * c.Hkv) * c.D, rows = c.B * c.T;
  kernels::AttnShape s{c.B, c.T, c.H, c.Hkv, c.D, qkv, qkv, c.H * c.D, opt};
  auto buf = random_vec(rows * qkv, 181, 2.f), dout = random_vec(rows * c.H * c.D, 182);
  const float* q = buf.data();
  const float* k = buf.data() + c.H * c.D;
  const float* v = k + c.Hkv * c.D;
  std::vector<float> o(rows * c.H * c.D), lse(c.B * c.H * c.T), dbuf(rows * qkv, 0.f);
  kernels::attention_fwd(s, q, k, v, o.data(), lse.data());
  kernels::attention_bwd(s, q, k, v, o.data(), lse.data(), dout.data(), dbuf.data(), dbuf.data() + c.H * c.D,
                         dbuf.data() + (c.H + c.Hkv) * c.D);
  auto dq = up(buf), ddo = up(dout);
  cuda::DeviceBuffer<float> d_o(o.size()), d_lse(lse.size()), d_delta(lse.size());
  const float* dk = dq.data() + c.H * c.D;
  const float* dv = dk + c.Hkv * c.D;
  cuda::attention_fwd(s, dq.data(), dk, dv, d_o.data(), d_lse.data(), nullptr);
  EXPECT_TRUE(all_close(down(d_o), o, tolerance(Kind::reduction, c.T)));
  EXPECT_TRUE(all_close(down(d_lse), lse, tolerance(Kind::reduction, c.T)));
  cuda::DeviceBuffer<float> ws(static_cast<size_t>(std::max<int64_t>(1, cuda::attention_bwd_workspace_floats(s))));
  for (bool split : {false, true}) {  // the dK/dV pass per KV head, then per query head with the ordered sum
    auto d_grad = up(std::vector<float>(rows * qkv, 0.f));
    cuda::attention_bwd(s, dq.data(), dk, dv, d_o.data(), d_lse.data(), ddo.data(), d_grad.data(),
                        d_grad.data() + c.H * c.D, d_grad.data() + (c.H + c.Hkv) * c.D, d_delta.data(), nullptr,
                        split ? ws.data() : nullptr);
    // window 1: dq, dk cancel to ~0 from O(1) terms on both sides
    EXPECT_TRUE(all_close(down(d_grad), dbuf, tolerance(Kind::reduction, c.T * c.D), opt.window == 1 ? 1e-5 : 0));
  }
}

TEST_F(CudaOps, FlashAttentionWithOptionsMatchesTheCpu) {
  // Windows inside one 32-key tile, across tiles and query blocks, of 1, and past T; soft-capping with
  // a custom scale (q scaled by 2: capped scores well into tanh's bend); GQA groups.
  for (AttnCase c : {AttnCase{2, 70, 4, 2, 32}, AttnCase{1, 200, 14, 2, 64}, AttnCase{1, 37, 3, 3, 18}}) {
    for (kernels::AttnOpts o : {attn_opts(0, 0, 5), attn_opts(0, 0, 40), attn_opts(0, 0, 1), attn_opts(0, 0, 1000),
                                attn_opts(0.09f, 0, 0), attn_opts(0, 2.5f, 0), attn_opts(0.1f, 3.f, 33)})
      check_flash_attention_opts(c, o);
  }
}

// Paged attention with options: the CPU kernel (the reference here) and the device's one-warp and split
// kernels on tables whose blocks wholly before each row's window are -1 (neither may read them).
void check_paged_attention_opts(int64_t H, int64_t Hkv, int64_t D, int64_t bs, int64_t table_stride,
                                std::vector<int64_t> len, uint64_t seed, const kernels::AttnOpts& opt) {
  SCOPED_TRACE("scale " + std::to_string(opt.scale) + " softcap " + std::to_string(opt.softcap) + " window " +
               std::to_string(opt.window));
  const int64_t n = static_cast<int64_t>(len.size()), blocks = n * table_stride + 3, row_floats = Hkv * D;
  auto kp = random_vec(blocks * bs * row_floats, seed), vp = random_vec(blocks * bs * row_floats, seed + 1);
  auto q = random_vec(n * H * D, seed + 2, 2.0f);
  std::vector<int32_t> tables(n * table_stride);
  for (int64_t i = 0; i < n * table_stride; ++i) tables[i] = static_cast<int32_t>((i * 7 + 3) % blocks);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t first = opt.window > 0 ? std::max<int64_t>(0, len[i] - opt.window) : 0;
    for (int64_t b = 0; b < first / bs; ++b) tables[i * table_stride + b] = -1;
  }
  std::vector<const int32_t*> table_ptrs(n);
  for (int64_t i = 0; i < n; ++i) table_ptrs[i] = tables.data() + i * table_stride;
  std::vector<float> o(n * H * D);
  kernels::PagedAttnArgs a;
  a.n = n, a.H = H, a.Hkv = Hkv, a.D = D;
  a.q = q.data(), a.q_stride = H * D, a.o = o.data(), a.o_stride = H * D;
  a.block_tables = table_ptrs.data(), a.kv_len = len.data(), a.k_pool = kp.data(), a.v_pool = vp.data();
  a.block_size = bs, a.opt = opt;
  kernels::paged_attention_fwd(a);
  std::vector<int32_t> len32(len.begin(), len.end());
  auto dk = up(kp), dv = up(vp), dq = up(q);
  auto dt = up(tables), dl = up(len32);
  const int64_t max_len = table_stride * bs;
  cuda::DeviceBuffer<float> ws(static_cast<size_t>(cuda::paged_attention_workspace_floats(n, H, D, max_len)));
  for (bool split : {false, true}) {
    SCOPED_TRACE(split ? "split kernel" : "one-warp kernel");
    cuda::DeviceBuffer<float> d_o(o.size());
    cuda::PagedAttnDeviceArgs b;
    b.n = n, b.H = H, b.Hkv = Hkv, b.D = D;
    b.q = dq.data(), b.q_stride = H * D, b.o = d_o.data(), b.o_stride = H * D;
    b.block_tables = dt.data(), b.table_stride = table_stride, b.kv_len = dl.data();
    b.k_pool = dk.data(), b.v_pool = dv.data(), b.block_size = bs, b.opt = opt;
    if (split) b.max_len = max_len, b.workspace = ws.data(), b.workspace_floats = static_cast<int64_t>(ws.size());
    cuda::paged_attention_fwd(b, nullptr);
    EXPECT_TRUE(all_close(down(d_o), o, tolerance(Kind::reduction, D)));
  }
}

TEST_F(CudaOps, PagedAttentionWithOptionsMatchesTheCpu) {
  // Rows longer and shorter than the window, a window starting mid-block and mid-tile, window 1.
  for (kernels::AttnOpts o : {attn_opts(0, 0, 20), attn_opts(0, 0, 100), attn_opts(0, 0, 1), attn_opts(0.1f, 2.5f, 0),
                              attn_opts(0.1f, 2.5f, 45)}) {
    check_paged_attention_opts(4, 2, 64, 16, 4, {1, 17, 40, 64, 33}, 191, o);
    check_paged_attention_opts(14, 2, 64, 16, 40, {600, 1, 31, 33, 257, 640, 0}, 195, o);
    check_paged_attention_opts(2, 1, 36, 8, 5, {39, 2}, 199, o);  // D not a multiple of 4: one-warp kernel only
  }
}

// dL/dlogprob and dL/dentropy fixed per row: the gradient the fused pass must carry back.
class FixedCoefLoss : public kernels::ClassifierLoss {
 public:
  void coefs(int64_t n, float, float, float* g_lp, float* g_ent) const override {
    *g_lp = 0.1f * static_cast<float>(n % 7) - 0.3f;
    *g_ent = n % 3 == 0 ? 0.05f : 0.f;
  }
};

TEST_F(CudaOps, FusedClassifierForwardAndGradientMatchTheCpu) {
  const int64_t N = 50, C = 64, V = 1003;
  auto h = random_vec(N * C, 101), w = random_vec(V * C, 102, 0.2f);
  std::vector<int32_t> targets(N);
  for (int64_t n = 0; n < N; ++n) targets[n] = n == 7 ? -1 : static_cast<int32_t>((n * 37) % V);
  FixedCoefLoss loss;
  std::vector<float> lp(N), ent(N), dh(N * C), dw(V * C, 0.f);
  kernels::ClassifierArgs a;
  a.h = h.data();
  a.w = w.data();
  a.targets = targets.data();
  a.N = N;
  a.C = C;
  a.V = V;
  a.logprob = lp.data();
  a.entropy = ent.data();
  a.loss = &loss;
  a.dh = dh.data();
  a.dw = dw.data();
  kernels::classifier_fused(a);
  cuda::Blas blas;
  cuda::ClassifierWorkspace ws(16, V);  // 4 chunks, the last partial
  auto d_h = up(h), d_w = up(w);
  auto d_t = up(targets);
  cuda::DeviceBuffer<float> d_lp(N), d_ent(N), d_dh(N * C);
  auto d_dw = up(std::vector<float>(V * C, 0.f));
  cuda::ClassifierDeviceArgs b;
  b.h = d_h.data();
  b.w = d_w.data();
  b.targets = d_t.data();
  b.N = N;
  b.C = C;
  b.V = V;
  b.logprob = d_lp.data();
  b.entropy = d_ent.data();
  b.loss = &loss;
  b.dh = d_dh.data();
  b.dw = d_dw.data();
  cuda::classifier_fused(blas, ws, b);
  EXPECT_TRUE(all_close(down(d_lp), lp, tolerance(Kind::reduction, V)));
  EXPECT_TRUE(all_close(down(d_ent), ent, tolerance(Kind::reduction, V)));
  EXPECT_TRUE(all_close(down(d_dh), dh, tolerance(Kind::reduction, V)));
  EXPECT_TRUE(all_close(down(d_dw), dw, tolerance(Kind::reduction, N)));
  // bf16 logits GEMM (tensor cores) and TF32 gradient GEMMs: bf16 tolerance.
  auto h16 = up(to_bf16(h)), w16 = up(to_bf16(w));
  b.h_bf16 = h16.data();
  b.w_bf16 = w16.data();
  b.loss = nullptr;
  cuda::classifier_fused(blas, ws, b);
  EXPECT_TRUE(all_close(down(d_lp), lp, tolerance(Kind::bf16, C)));
  EXPECT_TRUE(all_close(down(d_ent), ent, tolerance(Kind::bf16, C)));
}

// Gemma-2's final-logit soft-capping on the device: the CPU classifier's values and gradients, and
// cuda::softcap_rows gives the classifier's capped logits bit for bit (the rollout's logits equal training's).
TEST_F(CudaOps, FusedClassifierWithSoftcapMatchesTheCpuAndSoftcapRows) {
  const int64_t N = 37, C = 64, V = 1003;
  const float cap = 4.f;
  auto h = random_vec(N * C, 111), w = random_vec(V * C, 112, 0.6f);  // logits std ~4.8: the cap bends them
  std::vector<int32_t> targets(N);
  for (int64_t n = 0; n < N; ++n) targets[n] = n == 3 ? -1 : static_cast<int32_t>((n * 41) % V);
  FixedCoefLoss loss;
  std::vector<float> lp(N), ent(N), dh(N * C), dw(V * C, 0.f);
  kernels::ClassifierArgs a;
  a.h = h.data();
  a.w = w.data();
  a.targets = targets.data();
  a.N = N;
  a.C = C;
  a.V = V;
  a.logprob = lp.data();
  a.entropy = ent.data();
  a.loss = &loss;
  a.dh = dh.data();
  a.dw = dw.data();
  a.softcap = cap;
  kernels::classifier_fused(a);
  cuda::Blas blas;
  cuda::ClassifierWorkspace ws(N, V);  // one chunk: its logits stay in the workspace after a forward
  auto d_h = up(h), d_w = up(w);
  auto d_t = up(targets);
  cuda::DeviceBuffer<float> d_lp(N), d_ent(N), d_dh(N * C);
  auto d_dw = up(std::vector<float>(V * C, 0.f));
  cuda::ClassifierDeviceArgs b;
  b.h = d_h.data();
  b.w = d_w.data();
  b.targets = d_t.data();
  b.N = N;
  b.C = C;
  b.V = V;
  b.logprob = d_lp.data();
  b.entropy = d_ent.data();
  b.loss = &loss;
  b.dh = d_dh.data();
  b.dw = d_dw.data();
  b.softcap = cap;
  cuda::classifier_fused(blas, ws, b);
  EXPECT_TRUE(all_close(down(d_lp), lp, tolerance(Kind::reduction, V)));
  EXPECT_TRUE(all_close(down(d_ent), ent, tolerance(Kind::reduction, V)));
  EXPECT_TRUE(all_close(down(d_dh), dh, tolerance(Kind::reduction, V)));
  EXPECT_TRUE(all_close(down(d_dw), dw, tolerance(Kind::reduction, N)));
  b.loss = nullptr;  // forward only: raw logits, then capped logits, left in the workspace
  b.softcap = 0.f;
  cuda::classifier_fused(blas, ws, b);
  cuda::DeviceBuffer<float> raw(N * V);
  TEMPER_CUDA_CHECK(cudaMemcpy(raw.data(), ws.logits(), sizeof(float) * N * V, cudaMemcpyDeviceToDevice));
  b.softcap = cap;
  cuda::classifier_fused(blas, ws, b);
  std::vector<float> capped(N * V);
  cuda::copy_to_host(capped.data(), ws.logits(), sizeof(float) * N * V);
  auto raw_host = down(raw);
  cuda::softcap_rows(raw.data(), N * V, cap, nullptr);
  EXPECT_EQ(down(raw), capped);
  std::vector<float> cpu_capped = raw_host;
  kernels::softcap_rows(cpu_capped.data(), N * V, cap);
  EXPECT_TRUE(all_close(capped, cpu_capped, tolerance(Kind::elementwise, 1, 4)));
}

// Device inputs, outputs and scratch of cuda::sample_rows for B rows of V logits (row stride ld).
struct DeviceSampling {
  cuda::DeviceBuffer<float> logits, temps;
  cuda::DeviceBuffer<double> u;
  cuda::DeviceBuffer<int32_t> tok;
  cuda::DeviceBuffer<float> lp, plp, ent;
  cuda::DeviceBuffer<uint8_t> ws;
  cuda::SampleRowsArgs a;
  DeviceSampling(const std::vector<float>& z, int64_t B, int64_t V, int64_t ld, const std::vector<float>& t,
                 const std::vector<double>& uu)
      : logits(up(z)),
        temps(up(t)),
        u(up(uu)),
        tok(B),
        lp(B),
        plp(B),
        ent(B),
        ws(cuda::sample_rows_workspace_bytes(B, V)) {
    a.logits = logits.data();
    a.B = B;
    a.V = V;
    a.ld = ld;
    a.temperature = temps.data();
    a.u = u.data();
    a.token = tok.data();
    a.sample_logprob = lp.data();
    a.policy_logprob = plp.data();
    a.entropy = ent.data();
    a.workspace = ws.data();
    a.workspace_bytes = ws.size();
  }
};

TEST_F(CudaOps, DeviceSamplingDrawsTheCpuSamplersTokens) {
  const int64_t B = 7, V = 5003, ld = 5008;
  auto logits = random_vec(B * ld, 111, 2.0f);
  logits[2 * ld + 10] = -INFINITY;  // masked entries are skipped
  std::vector<float> temps = {1.0f, 0.7f, 1.3f, 0.f, 1.0f, 0.5f, 2.0f};
  std::vector<double> u(B);
  std::vector<int32_t> want(B);
  std::vector<float> want_lp(B), want_plp(B), want_ent(B);
  for (int64_t r = 0; r < B; ++r) {
    Rng a(1234, static_cast<uint64_t>(r)), b(1234, static_cast<uint64_t>(r));
    u[r] = a.uniform_f64();
    rollout::SamplerConfig cfg;
    cfg.greedy = temps[r] <= 0.f;
    cfg.temperature = cfg.greedy ? 1.f : temps[r];
    rollout::Sampler s(cfg);
    auto got = s.sample(logits.data() + r * ld, V, b);
    want[r] = got.token;
    want_lp[r] = got.logprob;
    kernels::logit_row_stats(logits.data() + r * ld, V, got.token, &want_plp[r], &want_ent[r]);
  }
  DeviceSampling ds(logits, B, V, ld, temps, u);
  cuda::SampleRowsArgs& a = ds.a;
  auto& tok = ds.tok;
  auto &lp = ds.lp, &plp = ds.plp, &ent = ds.ent;
  cuda::sample_rows(a, nullptr);
  EXPECT_EQ(down(tok), want);
  EXPECT_TRUE(all_close(down(lp), want_lp, tolerance(Kind::reduction, V)));
  // Policy statistics: rows without a masked logit (the CPU's logit_row_stats assumes finite logits).
  auto got_plp = down(plp), got_ent = down(ent);
  for (auto* v : {&got_plp, &got_ent, &want_plp, &want_ent}) v->erase(v->begin() + 2);
  EXPECT_TRUE(all_close(got_plp, want_plp, tolerance(Kind::reduction, V)));
  EXPECT_TRUE(all_close(got_ent, want_ent, tolerance(Kind::reduction, V)));
  // Forced rows take their token, with the policy's statistics as the sample log-prob.
  std::vector<int32_t> forced(B, -1);
  forced[4] = 17;
  auto dforced = up(forced);
  a.forced = dforced.data();
  cuda::sample_rows(a, nullptr);
  float flp = 0, fent = 0;
  kernels::logit_row_stats(logits.data() + 4 * ld, V, 17, &flp, &fent);
  EXPECT_EQ(down(tok)[4], 17);
  EXPECT_NEAR(down(lp)[4], flp, 1e-4);
  EXPECT_NEAR(down(plp)[4], flp, 1e-4);
  EXPECT_EQ(down(tok)[0], want[0]);  // the others as before
  a.forced = nullptr;
  // A row of -inf only draws nothing and says so.
  std::vector<float> dead(ld, -INFINITY);
  auto dd = up(dead);
  std::vector<float> one_t = {1.f};
  std::vector<double> one_u = {0.5};
  auto dt1 = up(one_t);
  auto du1 = up(one_u);
  a.logits = dd.data();
  a.B = 1;
  a.temperature = dt1.data();
  a.u = du1.data();
  cuda::sample_rows(a, nullptr);
  EXPECT_EQ(down(tok)[0], -1);
  a.workspace_bytes = 8;  // too small: refused, not overrun
  EXPECT_THROW(cuda::sample_rows(a, nullptr), Error);
}

// A Qwen-sized vocabulary (75 chunks of the device sampler) at the ends of the uniform's range and in
// between: the same tokens as the CPU sampler, whose draw walks the whole vocabulary in order.
TEST_F(CudaOps, DeviceSamplingOverALargeVocabularyDrawsTheCpuSamplersTokens) {
  const int64_t V = 151936, B = 6;
  auto logits = random_vec(B * V, 131, 3.0f);
  for (int64_t v = 0; v < 500; ++v) logits[1 * V + v] = -INFINITY;       // row 1's first chunk partly masked
  for (int64_t v = V - 2048; v < V; ++v) logits[5 * V + v] = -INFINITY;  // row 5's last chunk masked
  std::vector<float> temps = {1.0f, 0.8f, 1.0f, 0.f, 1.2f, 1.0f};
  std::vector<double> u = {0.0, 0.37, 0.9999999, 0.5, 0.61803, 0.999};
  std::vector<int32_t> want(B);
  for (int64_t r = 0; r < B; ++r) {
    rollout::SamplerConfig cfg;
    cfg.greedy = temps[r] <= 0.f;
    cfg.temperature = cfg.greedy ? 1.f : temps[r];
    const double ur = u[static_cast<size_t>(r)];
    // the CPU sampler's inverse CDF at ur: walk the tempered masses in vocabulary order
    const float* z = logits.data() + r * V;
    float mx = -INFINITY;
    int64_t arg = -1;
    for (int64_t v = 0; v < V; ++v)
      if (std::isfinite(z[v]) && z[v] > mx) mx = z[v], arg = v;
    if (cfg.greedy) {
      want[r] = static_cast<int32_t>(arg);
      continue;
    }
    const double inv_t = static_cast<double>(1.0f / cfg.temperature);
    double Z = 0;
    for (int64_t v = 0; v < V; ++v)
      if (std::isfinite(z[v])) Z += std::exp(static_cast<double>(z[v] - mx) * inv_t);
    double acc = 0, target = ur * Z;
    int32_t pick = -1;
    for (int64_t v = 0; v < V; ++v) {
      if (!std::isfinite(z[v])) continue;
      acc += std::exp(static_cast<double>(z[v] - mx) * inv_t);
      pick = static_cast<int32_t>(v);
      if (target < acc) break;
    }
    want[r] = pick;
  }
  DeviceSampling ds(logits, B, V, V, temps, u);
  cuda::sample_rows(ds.a, nullptr);
  EXPECT_EQ(down(ds.tok), want);
  auto got_plp = down(ds.plp);
  for (int64_t r = 0; r < B; ++r) {  // the chosen token's log-prob at temperature 1
    const float* z = logits.data() + r * V;
    float want_plp = 0, want_ent = 0;
    if (r == 1 || r == 5) continue;  // masked rows: logit_row_stats assumes finite logits
    kernels::logit_row_stats(z, V, want[r], &want_plp, &want_ent);
    EXPECT_NEAR(got_plp[r], want_plp, 1e-3) << "row " << r;
  }
}

TEST_F(CudaOps, Int4DequantMatmulMatchesTheDequantizedProduct) {
  const int64_t N = 70, K = 200, M = 11;
  auto W = random_vec(N * K, 121), X = random_vec(M * K, 122);
  kernels::Int4Weights q;
  kernels::quantize_int4(W.data(), N, K, K, 32, &q);
  std::vector<float> Wd(N * K);
  kernels::dequantize_int4(q, Wd.data());
  auto want = gemm_ref(false, true, M, N, K, X, K, Wd, K, std::vector<float>(M * N), N, 0.f, nullptr);
  cuda::Int4DeviceWeights dw(q);
  auto dx = up(X);
  cuda::DeviceBuffer<float> dy(M * N);
  cuda::int4_gemm(M, dx.data(), K, dw, false, dy.data(), N, nullptr);
  EXPECT_TRUE(all_close(down(dy), want, tolerance(Kind::reduction, K)));
}

// The drafter's linears in the CUDA model: bf16 activations, the bias and the residual addend fused.
TEST_F(CudaOps, Int4MatmulOverBf16ActivationsAddsTheBiasAndTheAddend) {
  const int64_t N = 70, K = 200, M = 11;
  auto W = random_vec(N * K, 123), X = random_vec(M * K, 124), bias = random_vec(N, 125), add = random_vec(M * N, 126);
  kernels::Int4Weights q;
  kernels::quantize_int4(W.data(), N, K, K, 32, &q);
  std::vector<float> Wd(N * K);
  kernels::dequantize_int4(q, Wd.data());
  auto Xr = round_bf16(X);
  auto want = gemm_ref(false, true, M, N, K, Xr, K, Wd, K, std::vector<float>(M * N), N, 0.f, nullptr);
  cuda::Int4DeviceWeights dw(q);
  auto dx = up(to_bf16(X));
  auto db = up(bias), da = up(add);
  cuda::DeviceBuffer<float> dy(M * N);
  cuda::int4_gemm_bf16(M, dx.data(), K, dw, dy.data(), N, nullptr, nullptr, nullptr);
  EXPECT_TRUE(all_close(down(dy), want, tolerance(Kind::reduction, K)));
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) want[m * N + n] += bias[n] + add[m * N + n];
  cuda::int4_gemm_bf16(M, dx.data(), K, dw, dy.data(), N, db.data(), da.data(), nullptr);
  EXPECT_TRUE(all_close(down(dy), want, tolerance(Kind::reduction, K)));
}

// Host arithmetic, no device needed: a workspace sized for a table's capacity serves every shorter
// table (the decode path sizes it once for the capacity while the stride moves below it).
TEST(CudaPagedAttention, WorkspaceBoundNeverShrinksWithTheLength) {
  int64_t prev = 0;
  for (int64_t len = 1; len <= 40000; ++len) {
    const int64_t w = cuda::paged_attention_workspace_floats(3, 14, 64, len);
    ASSERT_GE(w, prev) << "at " << len << " positions";
    prev = w;
  }
  EXPECT_EQ(cuda::paged_attention_workspace_floats(1, 1, 64, 1504), 32 * 66);       // capped at 32 splits
  EXPECT_EQ(cuda::paged_attention_workspace_floats(2, 3, 8, 100), 2 * 3 * 4 * 10);  // 4 tiles of 32
}

TEST(CudaRuntime, AvailabilityIsAnAnswerNotACrash) {
  // On a machine without a GPU this says false; with one, the device describes itself.
  if (!cuda::available()) {
    EXPECT_EQ(cuda::device_count(), 0);
    return;
  }
  auto info = cuda::device_info(0);
  EXPECT_FALSE(info.name.empty());
  EXPECT_GT(info.sms, 0);
  EXPECT_GT(info.total_bytes, size_t{0});
}

}  // namespace
}  // namespace temper
