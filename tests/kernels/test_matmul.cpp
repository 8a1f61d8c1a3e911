// Harness entry for matmul: a linear layer y = x W^T and its backward (dX = dY W, dW = dY^T X) on every
// GEMM backend and precision, against the fp64 reference; finite differences on the reference.
#include <cmath>
#include <iterator>

#include "common/op_harness.h"
#include "common/tolerance.h"
#include "temper/core/dtype.h"
#include "temper/kernels/matmul.h"

using namespace temper;
using namespace temper::kernels;
using namespace temper::test;

namespace {

struct LinearCase { int64_t M, N, K; };

void check_linear(const LinearCase& c, Precision prec) {
  auto x = random_vec(c.M * c.K, 1), w = random_vec(c.N * c.K, 2), dy = random_vec(c.M * c.N, 3);
  auto xd = to_f64(x), wd = to_f64(w), dyd = to_f64(dy);
  std::vector<double> y_ref(c.M * c.N), dx_ref(c.M * c.K), dw_ref(c.N * c.K);
  gemm_ref(false, true, c.M, c.N, c.K, xd.data(), c.K, wd.data(), c.K, 0, y_ref.data(), c.N);
  gemm_ref(false, false, c.M, c.K, c.N, dyd.data(), c.N, wd.data(), c.K, 0, dx_ref.data(), c.K);
  gemm_ref(true, false, c.N, c.K, c.M, dyd.data(), c.N, xd.data(), c.K, 0, dw_ref.data(), c.K);
  std::vector<float> y(c.M * c.N), dx(c.M * c.K), dw(c.N * c.K, 0.5f);
  gemm(false, true, c.M, c.N, c.K, x.data(), c.K, w.data(), c.K, 0.f, y.data(), c.N, prec);
  gemm(false, false, c.M, c.K, c.N, dy.data(), c.N, w.data(), c.K, 0.f, dx.data(), c.K, prec);
  gemm(true, false, c.N, c.K, c.M, dy.data(), c.N, x.data(), c.K, 1.f, dw.data(), c.K, prec);  // accumulate
  for (auto& v : dw) v -= 0.5f;
  bool bf = prec == Precision::bf16;
  EXPECT_TRUE(all_close(y, y_ref, bf ? tolerance(Kind::bf16, c.K) : tolerance(Kind::reduction, c.K)));
  EXPECT_TRUE(all_close(dx, dx_ref, bf ? tolerance(Kind::bf16, c.N) : tolerance(Kind::reduction, c.N)));
  EXPECT_TRUE(all_close(dw, dw_ref, bf ? tolerance(Kind::bf16, c.M) : tolerance(Kind::reduction, c.M, 2.0)));
  // Finite differences of L = sum(dy * y) on the reference.
  auto loss = [&] {
    std::vector<double> yy(c.M * c.N);
    gemm_ref(false, true, c.M, c.N, c.K, xd.data(), c.K, wd.data(), c.K, 0, yy.data(), c.N);
    double s = 0;
    for (size_t i = 0; i < yy.size(); ++i) s += yy[i] * dyd[i];
    return s;
  };
  EXPECT_TRUE(fd_check(xd, dx_ref, loss));
  EXPECT_TRUE(fd_check(wd, dw_ref, loss));
}

}  // namespace

TEST(OpMatmul, LinearForwardBackwardF32AllBackends) {
  for (GemmBackend b : {GemmBackend::openblas, GemmBackend::onednn}) {
    SCOPED_TRACE(std::string(gemm_backend_name(b)));
    GemmBackend saved = gemm_backend();
    gemm_set_backend(b);
    for (LinearCase c : {LinearCase{1, 1, 1}, LinearCase{7, 13, 29}, LinearCase{65, 88, 64}, LinearCase{33, 130, 257}})
      check_linear(c, Precision::f32);
    gemm_set_backend(saved);
  }
}

TEST(OpMatmul, LinearForwardBackwardBf16) {
  for (LinearCase c : {LinearCase{7, 13, 29}, LinearCase{65, 88, 64}, LinearCase{33, 130, 257}}) check_linear(c, Precision::bf16);
}

TEST(OpMatmul, Bf16PreRoundedWeightsStridedOutputAndBeta) {
  // y = x W^T into columns [3, 3+N) of a wider C, first with beta 0 then (same shape) beta 1, with
  // W given pre-rounded to bf16; then dX = dY W with the same pre-rounded W (not transposed).
  int64_t M = 37, N = 29, K = 70, ldc = N + 5;
  auto x = random_vec(M * K, 101), w = random_vec(N * K, 102), dy = random_vec(M * N, 103);
  std::vector<uint16_t> w16(N * K);
  convert_to_bf16(w.data(), w16.data(), N * K);
  std::vector<double> y_ref(M * N), dx_ref(M * K);
  auto xd = to_f64(x), wd = to_f64(w), dyd = to_f64(dy);
  gemm_ref(false, true, M, N, K, xd.data(), K, wd.data(), K, 0, y_ref.data(), N);
  gemm_ref(false, false, M, K, N, dyd.data(), N, wd.data(), K, 0, dx_ref.data(), K);
  std::vector<float> C(M * ldc, 100.f);
  gemm(false, true, M, N, K, x.data(), K, w.data(), K, 0.f, C.data() + 3, ldc, Precision::bf16, w16.data());
  std::vector<float> y(M * N);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) y[i * N + j] = C[i * ldc + 3 + j];
  EXPECT_TRUE(all_close(y, y_ref, tolerance(Kind::bf16, K)));
  EXPECT_EQ(C[0], 100.f);
  EXPECT_EQ(C[2 * ldc + N + 4], 100.f);
  gemm(false, true, M, N, K, x.data(), K, w.data(), K, 1.f, C.data() + 3, ldc, Precision::bf16, w16.data());
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) y[i * N + j] = C[i * ldc + 3 + j] / 2;
  EXPECT_TRUE(all_close(y, y_ref, tolerance(Kind::bf16, K)));
  std::vector<float> dx(M * K);
  gemm(false, false, M, K, N, dy.data(), N, w.data(), K, 0.f, dx.data(), K, Precision::bf16, w16.data());
  EXPECT_TRUE(all_close(dx, dx_ref, tolerance(Kind::bf16, N)));
}

TEST(OpMatmul, StridedOperands) {
  // A as columns [8, 8+K) of a wider matrix, C into a wider output: the attention kernel relies on this.
  int64_t M = 9, N = 5, K = 6, lda = 20, ldc = 11;
  auto a = random_vec(M * lda, 4), b = random_vec(N * K, 5);
  std::vector<float> c(M * ldc, 3.f);
  gemm(false, true, M, N, K, a.data() + 8, lda, b.data(), K, 0.f, c.data() + 2, ldc);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double s = 0;
      for (int64_t k = 0; k < K; ++k) s += double(a[i * lda + 8 + k]) * b[j * K + k];
      EXPECT_NEAR(c[i * ldc + 2 + j], s, 1e-5 * (1 + std::fabs(s)));
      EXPECT_EQ(c[i * ldc + 0], 3.f);
    }
}

TEST(OpMatmul, RoundToBf16InPlaceEqualsTheScalarRoundingEveryIsa) {
  // The K/V rounding of bf16 models (round_to_bf16): rows in parallel, each row in chunks of 256 values; every value
  // as the scalar f32 -> bf16 -> f32 (ties to even, infinities, NaN quieted, subnormals), the gaps between rows kept.
  const int64_t rows = 70, cols = 600, stride = 613;
  std::vector<float> x = random_vec(rows * stride, 11);
  const float specials[] = {1.f + 0x1p-8f,    1.f + 0x1p-7f + 0x1p-8f,
                            -(1.f + 0x1p-8f), 0x1p-130f,
                            -0x1p-140f,       INFINITY,
                            -INFINITY,        NAN,
                            3.4e38f,          -0.f};
  for (size_t i = 0; i < std::size(specials); ++i) x[i * 97] = specials[i];
  for_each_isa([&](Isa) {  // for_each_isa names the ISA in a failure
    std::vector<float> y = x;
    round_to_bf16(y.data(), rows, cols, stride);
    for (int64_t i = 0; i < rows * stride; ++i) {
      const bool in_row = i % stride < cols;
      const float want = in_row ? bf16_to_f32(f32_to_bf16(x[i])) : x[i];
      ASSERT_EQ(__builtin_bit_cast(uint32_t, y[i]), __builtin_bit_cast(uint32_t, want)) << "element " << i;
    }
  });
}

TEST(OpMatmul, SmallMDecodeKernelEveryIsaF32AndBf16) {
  // The decode kernel (M <= TEMPER_SMALL_GEMM_M rows) against fp64 over the same operands: f32
  // weights, and bf16 weights with A rounded to bf16 (each product is then exact in f32, so only the
  // summation differs from the reference). Sizes off the vector widths, strided A and C, beta 0 and 1.
  for_each_isa([](Isa isa) {
    SCOPED_TRACE(std::string(isa_name(isa)));
    for (int64_t M : {1, 2, 3, 5, 16, 41, 64})
      for (int64_t N : {1, 6, 67, 259})
        for (int64_t K : {1, 15, 16, 17, 70, 576}) {
          SCOPED_TRACE("M " + std::to_string(M) + " N " + std::to_string(N) + " K " + std::to_string(K));
          int64_t lda = K + 3, ldc = N + 2;
          auto a = random_vec(M * lda, 7), w = random_vec(N * K, 8);
          std::vector<uint16_t> w16(N * K), a16(M * lda);
          convert_to_bf16(w.data(), w16.data(), N * K);
          convert_to_bf16(a.data(), a16.data(), M * lda);
          auto widen = [](uint16_t h) { return double(__builtin_bit_cast(float, uint32_t(h) << 16)); };
          for (bool bf : {false, true})
            for (float beta : {0.f, 1.f}) {
              std::vector<float> c(M * ldc, 0.25f);
              gemm(false, true, M, N, K, a.data(), lda, w.data(), K, beta, c.data(), ldc,
                   bf ? Precision::bf16 : Precision::f32, bf ? w16.data() : nullptr);
              std::vector<double> ref(M * N);
              std::vector<float> got(M * N);
              for (int64_t i = 0; i < M; ++i)
                for (int64_t j = 0; j < N; ++j) {
                  double s = 0;
                  for (int64_t k = 0; k < K; ++k)
                    s += bf ? widen(a16[i * lda + k]) * widen(w16[j * K + k]) : double(a[i * lda + k]) * w[j * K + k];
                  ref[i * N + j] = s + (beta != 0 ? 0.25 : 0.0);
                  got[i * N + j] = c[i * ldc + j];
                }
              EXPECT_TRUE(all_close(got, ref, tolerance(Kind::reduction, K))) << (bf ? "bf16" : "f32") << " beta " << beta;
              EXPECT_EQ(c[M * ldc - 1], 0.25f);  // the padding column is not written
            }
        }
  });
}
