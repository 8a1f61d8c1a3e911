// The bf16 products on the tile layout: AMX (kernels/cpu/gemm_amx.h, through kernels::gemm and
// gemm_bf16_packed where the CPU has AMX-BF16) and AVX512-BF16 dot products on the same packed weights
// (cpu/gemm_dpbf16.h, the forward's products on CPUs without AMX): every orientation of gemm() (a linear layer's
// forward, dX, dW) against the fp64 product of the bf16-rounded operands, for shapes off the tile sizes (16 rows, 32
// outputs, 32 k), strided operands and beta 0 and 1; the forward's packed weights give the same bits as gemm() on the
// same operands; a row's result does not depend on the other rows, the threads or a row count that changes the tile
// configuration (the rollout engine's decode gives the training forward's bits).
#include <cmath>
#include <cstring>

#include "common/op_harness.h"
#include "common/tolerance.h"
#include "temper/core/cpu_features.h"
#include "temper/core/error.h"
#include "temper/core/thread_pool.h"
#include "temper/kernels/matmul.h"

using namespace temper;
using namespace temper::kernels;
using namespace temper::test;

namespace {

double rounded(float x) {
  uint16_t h;
  convert_to_bf16(&x, &h, 1);
  return __builtin_bit_cast(float, static_cast<uint32_t>(h) << 16);
}

bool amx() {
  return bf16_path() == Bf16Path::amx;
}

}  // namespace

TEST(GemmAmx, ThePathIsTheBestTheCpuHasUnlessAskedOtherwise) {
  const CpuFeatures& f = cpu_features();
  Bf16Path want = Bf16Path::onednn;
  if (cpu_isa() == Isa::avx512)
    want = bf16_path_supported(Bf16Path::amx) ? Bf16Path::amx
           : f.avx512_bf16                    ? Bf16Path::avx512_bf16
                                              : Bf16Path::avx512;
  if (const char* e = std::getenv("TEMPER_BF16_GEMM")) {
    ASSERT_TRUE(bf16_path_from_name(e, &want));
  }
  EXPECT_EQ(bf16_path(), want);
  EXPECT_EQ(bf16_path_supported(Bf16Path::amx), f.amx_bf16 && f.avx512_bf16 && cpu_isa_supported(Isa::avx512));
  if (!f.amx_bf16) {
    EXPECT_THROW(bf16_set_path(Bf16Path::amx), temper::Error);
  }
  Bf16Path p;
  EXPECT_FALSE(bf16_path_from_name("amx2", &p));
}

TEST(GemmAmx, EveryOrientationEqualsTheRoundedProductStridedAndAccumulating) {
  if (!amx()) GTEST_SKIP() << "no AMX-BF16 on this CPU";
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      for (int64_t M : {1, 5, 16, 17, 33, 70})
        for (int64_t N : {1, 16, 17, 33, 70})
          for (int64_t K : {1, 2, 31, 32, 33, 100}) {
            SCOPED_TRACE("ta " + std::to_string(ta) + " tb " + std::to_string(tb) + " M " + std::to_string(M) + " N " +
                         std::to_string(N) + " K " + std::to_string(K));
            const int64_t lda = (ta ? M : K) + 3, ldb = (tb ? K : N) + 1, ldc = N + 2;
            auto a = random_vec((ta ? K : M) * lda, 31), b = random_vec((tb ? N : K) * ldb, 32);
            for (float beta : {0.f, 1.f}) {
              std::vector<float> c(M * ldc, 0.25f);
              gemm(ta, tb, M, N, K, a.data(), lda, b.data(), ldb, beta, c.data(), ldc, Precision::bf16);
              std::vector<float> got(M * N);
              std::vector<double> ref(M * N);
              for (int64_t i = 0; i < M; ++i)
                for (int64_t j = 0; j < N; ++j) {
                  double s = beta != 0.f ? 0.25 : 0.0;
                  for (int64_t k = 0; k < K; ++k)
                    s += rounded(ta ? a[k * lda + i] : a[i * lda + k]) * rounded(tb ? b[j * ldb + k] : b[k * ldb + j]);
                  ref[i * N + j] = s;
                  got[i * N + j] = c[i * ldc + j];
                }
              EXPECT_TRUE(all_close(got, ref, tolerance(Kind::reduction, K))) << "beta " << beta;
              EXPECT_EQ(c[M * ldc - 1], 0.25f);  // the padding column is not written
            }
          }
}

TEST(GemmAmx, PreRoundedWeightsGiveTheBitsOfTheF32Weights) {
  if (!amx()) GTEST_SKIP() << "no AMX-BF16 on this CPU";
  for (bool tb : {false, true})
    for (int64_t N : {7, 33})
      for (int64_t K : {5, 70}) {
        SCOPED_TRACE("tb " + std::to_string(tb) + " N " + std::to_string(N) + " K " + std::to_string(K));
        const int64_t M = 19, ldb = (tb ? K : N) + 2;
        auto a = random_vec(M * K, 71), b = random_vec((tb ? N : K) * ldb, 72);
        std::vector<uint16_t> b16(b.size());
        convert_to_bf16(b.data(), b16.data(), static_cast<int64_t>(b.size()));
        std::vector<float> c32(M * N), c16(M * N);
        gemm(false, tb, M, N, K, a.data(), K, b.data(), ldb, 0.f, c32.data(), N, Precision::bf16);
        gemm(false, tb, M, N, K, a.data(), K, b.data(), ldb, 0.f, c16.data(), N, Precision::bf16, b16.data());
        EXPECT_EQ(std::memcmp(c32.data(), c16.data(), c32.size() * 4), 0);
      }
}

TEST(GemmAmx, LongReductionsSplitIntoRangesStayExact) {
  if (!amx()) GTEST_SKIP() << "no AMX-BF16 on this CPU";
  const int64_t M = 40, N = 50, K = 3000;  // k ranges of 1024: partial sums stored and reloaded twice
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      SCOPED_TRACE("ta " + std::to_string(ta) + " tb " + std::to_string(tb));
      const int64_t lda = ta ? M : K, ldb = tb ? K : N;
      auto a = random_vec((ta ? K : M) * lda, 51), b = random_vec((tb ? N : K) * ldb, 52);
      std::vector<float> c(M * N, 0.5f);
      gemm(ta, tb, M, N, K, a.data(), lda, b.data(), ldb, 1.f, c.data(), N, Precision::bf16);
      std::vector<double> ref(M * N);
      for (int64_t i = 0; i < M; ++i)
        for (int64_t j = 0; j < N; ++j) {
          double s = 0.5;
          for (int64_t k = 0; k < K; ++k)
            s += rounded(ta ? a[k * lda + i] : a[i * lda + k]) * rounded(tb ? b[j * ldb + k] : b[k * ldb + j]);
          ref[i * N + j] = s;
        }
      EXPECT_TRUE(all_close(c, ref, tolerance(Kind::reduction, K)));
    }
}

TEST(GemmAmx, PackedForwardGivesGemmsBitsAtEveryRowCount) {
  if (!amx()) GTEST_SKIP() << "no AMX-BF16 on this CPU";
  const int64_t M = 300, N = 330, K = 600;  // past one 256-row chunk, a panel and a k block cut short
  auto x = random_vec(M * K, 41), w = random_vec(N * K, 42);
  std::vector<uint16_t> wp(static_cast<size_t>(packed_size(N, K)));
  bf16_pack_weight(w.data(), N, K, wp.data());
  std::vector<float> all(M * N), ref(M * N);
  gemm_bf16_packed(M, N, K, x.data(), K, wp.data(), 0.f, all.data(), N);
  gemm(false, true, M, N, K, x.data(), K, w.data(), K, 0.f, ref.data(), N, Precision::bf16);
  EXPECT_EQ(std::memcmp(all.data(), ref.data(), all.size() * 4), 0);
  for (int64_t rows : {1, 2, 15, 16, 17, 31, 32, 33}) {  // every tile configuration; rows start mid-matrix
    std::vector<float> part(rows * N);
    const int64_t m0 = 100;
    gemm_bf16_packed(rows, N, K, x.data() + m0 * K, K, wp.data(), 0.f, part.data(), N);
    EXPECT_EQ(std::memcmp(part.data(), all.data() + m0 * N, part.size() * 4), 0) << rows << " rows";
  }
  const int threads = num_threads();
  set_num_threads(1);
  std::vector<float> one(M * N);
  gemm_bf16_packed(M, N, K, x.data(), K, wp.data(), 0.f, one.data(), N);
  set_num_threads(threads);
  EXPECT_EQ(std::memcmp(all.data(), one.data(), all.size() * 4), 0);
}

// The AVX512-BF16 forward (the path of CPUs without AMX) on the same packed weights: the rounded product within
// the reduction tolerance, strided, accumulating, every row count of its 12-row tiles; a row's bits do not depend
// on the other rows.
TEST(GemmAmx, DotProductPathEqualsTheRoundedProductAtEveryRowCount) {
  if (!bf16_path_supported(Bf16Path::avx512_bf16)) GTEST_SKIP() << "no AVX512-BF16 on this CPU";
  const Bf16Path saved = bf16_path();
  bf16_set_path(Bf16Path::avx512_bf16);
  for (int64_t M : {1, 11, 12, 13, 25, 200})
    for (int64_t N : {1, 17, 33, 70})
      for (int64_t K : {1, 33, 100, 576}) {
        SCOPED_TRACE("M " + std::to_string(M) + " N " + std::to_string(N) + " K " + std::to_string(K));
        const int64_t lda = K + 3, ldc = N + 2;
        auto a = random_vec(M * lda, 61), w = random_vec(N * K, 62);
        std::vector<uint16_t> wp(static_cast<size_t>(packed_size(N, K)));
        bf16_pack_weight(w.data(), N, K, wp.data());
        for (float beta : {0.f, 1.f}) {
          std::vector<float> c(M * ldc, 0.25f), got(M * N);
          gemm_bf16_packed(M, N, K, a.data(), lda, wp.data(), beta, c.data(), ldc);
          std::vector<double> ref(M * N);
          for (int64_t i = 0; i < M; ++i)
            for (int64_t j = 0; j < N; ++j) {
              double s = beta != 0.f ? 0.25 : 0.0;
              for (int64_t k = 0; k < K; ++k) s += rounded(a[i * lda + k]) * rounded(w[j * K + k]);
              ref[i * N + j] = s;
              got[i * N + j] = c[i * ldc + j];
            }
          EXPECT_TRUE(all_close(got, ref, tolerance(Kind::reduction, K))) << "beta " << beta;
          EXPECT_EQ(c[M * ldc - 1], 0.25f);
          if (M > 1 && beta == 0.f) {  // the last row alone
            std::vector<float> one(N);
            gemm_bf16_packed(1, N, K, a.data() + (M - 1) * lda, lda, wp.data(), 0.f, one.data(), N);
            EXPECT_EQ(std::memcmp(one.data(), c.data() + (M - 1) * ldc, N * 4), 0);
          }
        }
      }
  bf16_set_path(saved);
}

TEST(GemmAmx, NanAndInfinityPropagate) {
  if (!amx()) GTEST_SKIP() << "no AMX-BF16 on this CPU";
  const int64_t M = 3, N = 4, K = 40;
  std::vector<float> a(M * K, 1.f), w(N * K, 1.f), c(M * N);
  a[1 * K + 7] = std::nanf("");
  w[2 * K + 39] = INFINITY;
  gemm(false, true, M, N, K, a.data(), K, w.data(), K, 0.f, c.data(), N, Precision::bf16);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      if (i == 1)
        EXPECT_TRUE(std::isnan(c[i * N + j])) << i << "," << j;
      else if (j == 2)
        EXPECT_EQ(c[i * N + j], INFINITY) << i << "," << j;
      else
        EXPECT_EQ(c[i * N + j], static_cast<float>(K)) << i << "," << j;
    }
}
