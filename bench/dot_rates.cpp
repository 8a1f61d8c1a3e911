// Instruction rates behind the bf16 kernel choice (docs/PERFORMANCE.md, "Packed forward products"): 12
// independent accumulator chains of AVX-512 BF16 vdpbf16ps (32 bf16 multiply-adds each) against the same
// of vfmadd231ps (16 f32 multiply-adds each), one thread. Run: build/bench/dot_rates [--iters N].
#include <immintrin.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "temper/core/cpu_features.h"

// GCC 12's AVX-512 headers trip -Wuninitialized on their own _mm512_undefined_* (GCC bug 105593).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace {

constexpr int kChains = 12;

__attribute__((target("avx512f,avx512bw,avx512bf16"))) double dpbf16_rate(long iters, float* sink) {
  __m512 c[kChains];
  for (int j = 0; j < kChains; ++j) c[j] = _mm512_set1_ps(static_cast<float>(j) * 1e-3f);
  __m512bh a = (__m512bh)_mm512_set1_epi16(0x3f80), b = (__m512bh)_mm512_set1_epi16(0x3c00);
  const auto t0 = std::chrono::steady_clock::now();
  for (long i = 0; i < iters; ++i) {
#pragma GCC unroll 12
    for (int j = 0; j < kChains; ++j) c[j] = _mm512_dpbf16_ps(c[j], a, b);
    asm volatile("" : "+v"(a));
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  for (int j = 0; j < kChains; ++j) *sink += _mm512_reduce_add_ps(c[j]);
  return kChains * static_cast<double>(iters) / s;
}

__attribute__((target("avx512f,fma"))) double fma_rate(long iters, float* sink) {
  __m512 c[kChains];
  for (int j = 0; j < kChains; ++j) c[j] = _mm512_set1_ps(static_cast<float>(j) * 1e-3f);
  __m512 a = _mm512_set1_ps(1.0001f), b = _mm512_set1_ps(0.9999f);
  const auto t0 = std::chrono::steady_clock::now();
  for (long i = 0; i < iters; ++i) {
#pragma GCC unroll 12
    for (int j = 0; j < kChains; ++j) c[j] = _mm512_fmadd_ps(c[j], a, b);
    asm volatile("" : "+v"(a));
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  for (int j = 0; j < kChains; ++j) *sink += _mm512_reduce_add_ps(c[j]);
  return kChains * static_cast<double>(iters) / s;
}

}  // namespace

int main(int argc, char** argv) {
  long iters = 100000000;
  for (int i = 1; i + 1 < argc; i += 2)
    if (!std::strcmp(argv[i], "--iters")) iters = std::atol(argv[i + 1]);
  const temper::CpuFeatures& f = temper::cpu_features();
  if (!f.avx512f) {
    std::printf("{\"error\": \"no AVX-512 on this CPU\"}\n");
    return 0;
  }
  float sink = 0;
  const double fma = fma_rate(iters, &sink);
  std::printf("{\"vfmadd231ps_per_s\": %.3g, \"f32_madds_per_s\": %.3g", fma, fma * 16);
  if (f.avx512_bf16) {
    const double dp = dpbf16_rate(iters, &sink);
    std::printf(", \"vdpbf16ps_per_s\": %.3g, \"bf16_madds_per_s\": %.3g", dp, dp * 32);
  }
  std::printf(", \"sink\": %g}\n", static_cast<double>(sink));
  return 0;
}
