// The packed forward products (kernels/cpu/gemm_packed.h through kernels::gemm_f32_packed and
// gemm_bf16_packed) on AVX-512: every output bitwise equal to the plain sequential sum
// c = fma(x[k], w[k], c) over k (bf16: of the bf16-rounded operands; the AVX-512 path, AMX off), for shapes
// off the panel width (32) and the row tile (12), strided operands, beta 0 and 1; hence a row's result
// does not depend on the other rows or on the threads (checked on every bf16 path the CPU has: the tile
// layout's own tests are test_gemm_amx.cpp).
#include <cmath>
#include <cstring>

#include "common/op_harness.h"
#include "common/tolerance.h"
#include "temper/core/thread_pool.h"
#include "temper/kernels/matmul.h"

using namespace temper;
using namespace temper::kernels;
using namespace temper::test;

namespace {

float rounded(float x) {
  uint16_t h;
  convert_to_bf16(&x, &h, 1);
  return __builtin_bit_cast(float, static_cast<uint32_t>(h) << 16);
}

std::vector<uint16_t> packed(const std::vector<float>& w, int64_t N, int64_t K) {
  std::vector<uint16_t> p(static_cast<size_t>(packed_size(N, K)));
  bf16_pack_weight(w.data(), N, K, p.data());
  return p;
}

std::vector<float> packed_f32(const std::vector<float>& w, int64_t N, int64_t K) {
  std::vector<float> p(static_cast<size_t>(packed_size(N, K)));
  f32_pack_weight(w.data(), N, K, p.data());
  return p;
}

}  // namespace

TEST(GemmPacked, EveryOutputIsTheSequentialFmaSumBitwiseF32AndBf16) {
  if (!packed_supported()) GTEST_SKIP() << "the packed products need AVX-512";
  const Bf16Path saved = bf16_path();
  bf16_set_path(Bf16Path::avx512);
  for (bool bf : {false, true})
    for (int64_t M : {1, 3, 12, 13, 25, 70})
      for (int64_t N : {1, 5, 32, 33, 70})
        for (int64_t K : {1, 2, 31, 100, 576}) {
          SCOPED_TRACE(std::string(bf ? "bf16" : "f32") + " M " + std::to_string(M) + " N " + std::to_string(N) +
                       " K " + std::to_string(K));
          const int64_t lda = K + 3, ldc = N + 2;
          auto a = random_vec(M * lda, 11), w = random_vec(N * K, 12);
          const auto wp = packed(w, N, K);
          const auto wpf = packed_f32(w, N, K);
          auto op = [&](float x) { return bf ? rounded(x) : x; };
          for (float beta : {0.f, 1.f}) {
            std::vector<float> c(M * ldc, 0.25f);
            if (bf)
              gemm_bf16_packed(M, N, K, a.data(), lda, wp.data(), beta, c.data(), ldc);
            else
              gemm_f32_packed(M, N, K, a.data(), lda, wpf.data(), beta, c.data(), ldc);
            int64_t bad = 0;
            std::vector<float> got(M * N);
            std::vector<double> ref(M * N);
            for (int64_t i = 0; i < M; ++i)
              for (int64_t j = 0; j < N; ++j) {
                float s = 0.f;
                double d = 0;
                for (int64_t k = 0; k < K; ++k) {
                  s = std::fma(op(a[i * lda + k]), op(w[j * K + k]), s);
                  d += double(op(a[i * lda + k])) * op(w[j * K + k]);
                }
                const float want = beta != 0.f ? 0.25f + s : s;
                bad += std::memcmp(&want, &c[i * ldc + j], 4) != 0;
                got[i * N + j] = c[i * ldc + j];
                ref[i * N + j] = d + (beta != 0.f ? 0.25 : 0.0);
              }
            EXPECT_EQ(bad, 0) << "beta " << beta;
            EXPECT_TRUE(all_close(got, ref, tolerance(Kind::reduction, K)));
            EXPECT_EQ(c[M * ldc - 1], 0.25f);  // the padding column is not written
          }
        }
  bf16_set_path(saved);
}

TEST(GemmPacked, ARowsResultDoesNotDependOnTheOtherRowsOrTheThreads) {
  if (!packed_supported()) GTEST_SKIP() << "the packed products need AVX-512";
  const Bf16Path saved = bf16_path();
  for (Bf16Path path : {Bf16Path::avx512, Bf16Path::avx512_bf16, Bf16Path::amx}) {
    if (!bf16_path_supported(path)) continue;
    SCOPED_TRACE(std::string(bf16_path_name(path)));
    bf16_set_path(path);
    const int64_t M = 300, N = 301, K = 576;  // more rows than one pass over the panels takes (192; AMX 256)
    auto a = random_vec(M * K, 21), w = random_vec(N * K, 22);
    const auto wp = packed(w, N, K);
    std::vector<float> all(M * N), one(N), one_thread(M * N);
    gemm_bf16_packed(M, N, K, a.data(), K, wp.data(), 0.f, all.data(), N);
    const int threads = num_threads();
    set_num_threads(1);
    gemm_bf16_packed(M, N, K, a.data(), K, wp.data(), 0.f, one_thread.data(), N);
    set_num_threads(threads);
    EXPECT_EQ(std::memcmp(all.data(), one_thread.data(), all.size() * 4), 0);
    for (int64_t m = 0; m < M; ++m) {
      gemm_bf16_packed(1, N, K, a.data() + m * K, K, wp.data(), 0.f, one.data(), N);
      EXPECT_EQ(std::memcmp(one.data(), all.data() + m * N, N * 4), 0) << "row " << m;
    }
  }
  bf16_set_path(saved);
}
