// The bf16 forward product with one fixed sum per output (kernels/cpu/gemm_bf16.h), reached through
// gemm(..., Precision::bf16, w16) on AVX-512: every output bitwise equal to a scalar model of the sum
// (lane i of chunk j adds the pair 32 j + 2 i, 32 j + 2 i + 1, odd first, by fma; the lanes in a fixed
// tree), hence independent of the other rows and of the threads; and that sum is vdpbf16ps's where the
// CPU has AVX-512 BF16.
#include <immintrin.h>

#include <cmath>
#include <cstring>

#include "common/op_harness.h"
#include "temper/core/cpu_features.h"
#include "temper/core/thread_pool.h"
#include "temper/kernels/matmul.h"

using namespace temper;
using namespace temper::kernels;
using namespace temper::test;

namespace {

float widen(uint16_t h) { return __builtin_bit_cast(float, static_cast<uint32_t>(h) << 16); }

float reduce_tree(const float* l) {
  float t[8], u[4];
  for (int i = 0; i < 8; ++i) t[i] = l[i] + l[i + 8];
  for (int i = 0; i < 4; ++i) u[i] = t[i] + t[i + 4];
  return (u[0] + u[2]) + (u[1] + u[3]);
}

// The model of one output: x and w bf16 rows of length K.
float model_dot(const uint16_t* x, const uint16_t* w, int64_t K) {
  float lane[16] = {};
  for (int64_t c = 0; c < K; c += 32)
    for (int64_t i = 0; i < 16; ++i) {
      const int64_t e = c + 2 * i, o = e + 1;
      const float xe = e < K ? widen(x[e]) : 0.f, we = e < K ? widen(w[e]) : 0.f;
      const float xo = o < K ? widen(x[o]) : 0.f, wo = o < K ? widen(w[o]) : 0.f;
      lane[i] = std::fma(xe, we, std::fma(xo, wo, lane[i]));
    }
  return reduce_tree(lane);
}

// The same lanes by the instruction itself.
__attribute__((target("avx512f,avx512bw,avx512bf16"))) float dpbf16_dot(const uint16_t* x, const uint16_t* w, int64_t K) {
  __m512 acc = _mm512_setzero_ps();
  for (int64_t k = 0; k < K; k += 32) {
    const __mmask32 m = K - k >= 32 ? 0xffffffffu : (1u << (K - k)) - 1u;
    acc = _mm512_dpbf16_ps(acc, (__m512bh)_mm512_maskz_loadu_epi16(m, x + k), (__m512bh)_mm512_maskz_loadu_epi16(m, w + k));
  }
  alignas(64) float lane[16];
  _mm512_store_ps(lane, acc);
  return reduce_tree(lane);
}

bool ours_active() { return cpu_isa() == Isa::avx512; }

}  // namespace

TEST(GemmBf16, EveryOutputIsTheModelsFixedSumBitwise) {
  if (!ours_active()) GTEST_SKIP() << "bf16 products go to oneDNN without AVX-512";
  for (int64_t M : {1, 3, 4, 5, 13, 70})
    for (int64_t N : {1, 5, 8, 37})
      for (int64_t K : {1, 2, 31, 32, 33, 100, 576}) {
        SCOPED_TRACE("M " + std::to_string(M) + " N " + std::to_string(N) + " K " + std::to_string(K));
        const int64_t lda = K + 3, ldc = N + 2;
        auto a = random_vec(M * lda, 11), w = random_vec(N * K, 12);
        std::vector<uint16_t> a16(M * lda), w16(N * K);
        convert_to_bf16(a.data(), a16.data(), M * lda);
        convert_to_bf16(w.data(), w16.data(), N * K);
        for (float beta : {0.f, 1.f}) {
          std::vector<float> c(M * ldc, 0.25f);
          gemm(false, true, M, N, K, a.data(), lda, w.data(), K, beta, c.data(), ldc, Precision::bf16, w16.data());
          int64_t bad = 0;
          for (int64_t i = 0; i < M; ++i)
            for (int64_t j = 0; j < N; ++j) {
              const float s = model_dot(a16.data() + i * lda, w16.data() + j * K, K);
              const float want = beta != 0.f ? 0.25f + s : s;
              bad += std::memcmp(&want, &c[i * ldc + j], 4) != 0;
            }
          EXPECT_EQ(bad, 0) << "beta " << beta;
          EXPECT_EQ(c[M * ldc - 1], 0.25f);  // the padding column is not written
        }
      }
}

TEST(GemmBf16, ARowsResultDoesNotDependOnTheOtherRowsOrTheThreads) {
  if (!ours_active()) GTEST_SKIP() << "bf16 products go to oneDNN without AVX-512";
  const int64_t M = 37, N = 301, K = 576;
  auto a = random_vec(M * K, 21), w = random_vec(N * K, 22);
  std::vector<uint16_t> w16(N * K);
  convert_to_bf16(w.data(), w16.data(), N * K);
  std::vector<float> all(M * N), one(N), one_thread(M * N);
  gemm(false, true, M, N, K, a.data(), K, w.data(), K, 0.f, all.data(), N, Precision::bf16, w16.data());
  const int threads = num_threads();
  set_num_threads(1);
  gemm(false, true, M, N, K, a.data(), K, w.data(), K, 0.f, one_thread.data(), N, Precision::bf16, w16.data());
  set_num_threads(threads);
  EXPECT_EQ(std::memcmp(all.data(), one_thread.data(), all.size() * 4), 0);
  for (int64_t m = 0; m < M; ++m) {
    gemm(false, true, 1, N, K, a.data() + m * K, K, w.data(), K, 0.f, one.data(), N, Precision::bf16, w16.data());
    EXPECT_EQ(std::memcmp(one.data(), all.data() + m * N, N * 4), 0) << "row " << m;
  }
}

TEST(GemmBf16, TheSumIsVdpbf16psWhereTheCpuHasIt) {
  if (!cpu_features().avx512_bf16) GTEST_SKIP() << "no AVX-512 BF16 on this CPU";
  int64_t bad = 0, n = 0;
  for (int64_t K : {1, 7, 32, 33, 64, 95, 576, 1536}) {
    auto x = random_vec(16 * K, 31), w = random_vec(16 * K, 32);
    for (auto& v : x) v *= std::exp2(static_cast<float>(static_cast<int>(std::fabs(v) * 37) % 41 - 20));  // wide exponents
    std::vector<uint16_t> x16(x.size()), w16(w.size());
    convert_to_bf16(x.data(), x16.data(), static_cast<int64_t>(x.size()));
    convert_to_bf16(w.data(), w16.data(), static_cast<int64_t>(w.size()));
    for (int64_t r = 0; r < 16; ++r, ++n) {
      const float m = model_dot(x16.data() + r * K, w16.data() + r * K, K);
      const float d = dpbf16_dot(x16.data() + r * K, w16.data() + r * K, K);
      bad += std::memcmp(&m, &d, 4) != 0;
    }
  }
  EXPECT_EQ(bad, 0) << "of " << n;
}
