// The AVX-512 panel kernels' row store (gemm_packed.cpp, gemm_dpbf16.cpp): 32 outputs of one row, the first n of
// them when the panel is cut by N, written or (accumulate) added to C. Include only from AVX-512-compiled sources;
// static: each includer keeps its own copy (no inline function shared across sources built with other flags).
#pragma once

#include <immintrin.h>

#include <cstdint>

namespace temper::kernels {

static inline void store_panel_row(float* c, __m512 lo, __m512 hi, int64_t n, bool accumulate) {
  const __mmask16 m0 = n >= 16 ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>((1u << n) - 1u);
  const __mmask16 m1 = n >= 32   ? static_cast<__mmask16>(0xffff)
                       : n <= 16 ? 0
                                 : static_cast<__mmask16>((1u << (n - 16)) - 1u);
  if (accumulate) {
    lo = _mm512_add_ps(_mm512_maskz_loadu_ps(m0, c), lo);
    hi = _mm512_add_ps(_mm512_maskz_loadu_ps(m1, c + 16), hi);
  }
  _mm512_mask_storeu_ps(c, m0, lo);
  _mm512_mask_storeu_ps(c + 16, m1, hi);
}

}  // namespace temper::kernels
