#include "temper/flow/layer_norm.h"

#include <cmath>
#include <cstring>
#include <vector>

#include "temper/core/profile.h"
#include "temper/core/thread_pool.h"
#include "temper/flow/dit_simd.h"

namespace temper::flow {
namespace {

// One row: h and its 1/std.
inline float norm_row(const float* x, float* h, int64_t C, float eps) {
  float sum = 0.f;
#pragma omp simd reduction(+ : sum)
  for (int64_t c = 0; c < C; ++c) sum += x[c];
  const float mean = sum / static_cast<float>(C);
  float var = 0.f;
#pragma omp simd reduction(+ : var)
  for (int64_t c = 0; c < C; ++c) var += (x[c] - mean) * (x[c] - mean);
  const float rstd = 1.0f / std::sqrt(var / static_cast<float>(C) + eps);
#pragma omp simd
  for (int64_t c = 0; c < C; ++c) h[c] = (x[c] - mean) * rstd;
  return rstd;
}

// dx += rstd * (dh - mean(dh) - h * mean(dh * h)) for one row.
inline void norm_row_bwd(const float* dh, const float* h, float rstd, float* dx, int64_t C) {
  float s1 = 0.f, s2 = 0.f;
#pragma omp simd reduction(+ : s1, s2)
  for (int64_t c = 0; c < C; ++c) {
    s1 += dh[c];
    s2 += dh[c] * h[c];
  }
  const float inv = 1.0f / static_cast<float>(C), m1 = s1 * inv, m2 = s2 * inv;
#pragma omp simd
  for (int64_t c = 0; c < C; ++c) dx[c] += rstd * (dh[c] - m1 - h[c] * m2);
}

TEMPER_DIT_CLONES void norm_rows(const float* x, float* h, float* rstd, int64_t r0, int64_t r1, int64_t C, float eps) {
  for (int64_t r = r0; r < r1; ++r) rstd[r] = norm_row(x + r * C, h + r * C, C, eps);
}

TEMPER_DIT_CLONES void norm_rows_bwd(const float* dh, const float* h, const float* rstd, float* dx, int64_t r0,
                                     int64_t r1, int64_t C, bool accumulate) {
  for (int64_t r = r0; r < r1; ++r) {
    if (!accumulate) std::memset(dx + r * C, 0, static_cast<size_t>(C) * sizeof(float));
    norm_row_bwd(dh + r * C, h + r * C, rstd[r], dx + r * C, C);
  }
}

TEMPER_DIT_CLONES void adaln_rows(const float* x, int64_t r0, int64_t r1, int64_t T, int64_t C, float eps, Modulation m,
                                  float* h, float* rstd, float* a) {
  for (int64_t r = r0; r < r1; ++r) {
    const int64_t b = r / T;
    const float* shift = m.shift + b * m.ld;
    const float* scale = m.scale + b * m.ld;
    float* hr = h + r * C;
    float* ar = a + r * C;
    rstd[r] = norm_row(x + r * C, hr, C, eps);
#pragma omp simd
    for (int64_t c = 0; c < C; ++c) ar[c] = hr[c] * (1.0f + scale[c]) + shift[c];
  }
}

// Item b's rows: dshift, dscale (written) and dx += the layer norm's backward of da * (1 + scale).
TEMPER_DIT_CLONES void adaln_item_bwd(const float* da, const float* h, const float* rstd, int64_t b, int64_t T,
                                      int64_t C, const float* scale, float* dsh, float* dsc, float* dh, float* dx) {
  std::memset(dsh, 0, static_cast<size_t>(C) * sizeof(float));
  std::memset(dsc, 0, static_cast<size_t>(C) * sizeof(float));
  for (int64_t r = b * T; r < (b + 1) * T; ++r) {
    const float* dar = da + r * C;
    const float* hr = h + r * C;
#pragma omp simd
    for (int64_t c = 0; c < C; ++c) {
      dsh[c] += dar[c];
      dsc[c] += dar[c] * hr[c];
      dh[c] = dar[c] * (1.0f + scale[c]);
    }
    norm_row_bwd(dh, hr, rstd[r], dx + r * C, C);
  }
}

}  // namespace

void layer_norm_fwd(const float* x, float* h, float* rstd, int64_t rows, int64_t C, float eps) {
  parallel_for(rows, 16, [&](int64_t r0, int64_t r1) { norm_rows(x, h, rstd, r0, r1, C, eps); });
}

void layer_norm_bwd(const float* dh, const float* h, const float* rstd, float* dx, int64_t rows, int64_t C,
                    bool accumulate) {
  parallel_for(rows, 16, [&](int64_t r0, int64_t r1) { norm_rows_bwd(dh, h, rstd, dx, r0, r1, C, accumulate); });
}

void adaln_fwd(const float* x, int64_t B, int64_t T, int64_t C, float eps, Modulation m, float* h, float* rstd,
               float* a) {
  TEMPER_PROFILE("dit.adaln");
  parallel_for(B * T, 16, [&](int64_t r0, int64_t r1) { adaln_rows(x, r0, r1, T, C, eps, m, h, rstd, a); });
}

void adaln_bwd(const float* da, const float* h, const float* rstd, int64_t B, int64_t T, int64_t C, Modulation m,
               float* dshift, float* dscale, int64_t dld, float* dx) {
  TEMPER_PROFILE("dit.adaln");
  parallel_for(B, 1, [&](int64_t b0, int64_t b1) {
    std::vector<float> dh(static_cast<size_t>(C));
    for (int64_t b = b0; b < b1; ++b)
      adaln_item_bwd(da, h, rstd, b, T, C, m.scale + b * m.ld, dshift + b * dld, dscale + b * dld, dh.data(), dx);
  });
}

}  // namespace temper::flow
