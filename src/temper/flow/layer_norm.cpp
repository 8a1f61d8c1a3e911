#include "temper/flow/layer_norm.h"

#include <cmath>
#include <cstring>
#include <vector>

#include "temper/core/thread_pool.h"

namespace temper::flow {
namespace {

// One row: h and its 1/std.
inline float norm_row(const float* x, float* h, int64_t C, float eps) {
  float sum = 0.f;
  for (int64_t c = 0; c < C; ++c) sum += x[c];
  const float mean = sum / static_cast<float>(C);
  float var = 0.f;
  for (int64_t c = 0; c < C; ++c) {
    const float d = x[c] - mean;
    var += d * d;
  }
  const float rstd = 1.0f / std::sqrt(var / static_cast<float>(C) + eps);
  for (int64_t c = 0; c < C; ++c) h[c] = (x[c] - mean) * rstd;
  return rstd;
}

// dx (+)= rstd * (dh - mean(dh) - h * mean(dh * h)) for one row.
inline void norm_row_bwd(const float* dh, const float* h, float rstd, float* dx, int64_t C, bool accumulate) {
  float s1 = 0.f, s2 = 0.f;
  for (int64_t c = 0; c < C; ++c) {
    s1 += dh[c];
    s2 += dh[c] * h[c];
  }
  const float inv = 1.0f / static_cast<float>(C), m1 = s1 * inv, m2 = s2 * inv;
  if (accumulate) {
    for (int64_t c = 0; c < C; ++c) dx[c] += rstd * (dh[c] - m1 - h[c] * m2);
  } else {
    for (int64_t c = 0; c < C; ++c) dx[c] = rstd * (dh[c] - m1 - h[c] * m2);
  }
}

}  // namespace

void layer_norm_fwd(const float* x, float* h, float* rstd, int64_t rows, int64_t C, float eps) {
  parallel_for(rows, 16, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) rstd[r] = norm_row(x + r * C, h + r * C, C, eps);
  });
}

void layer_norm_bwd(const float* dh, const float* h, const float* rstd, float* dx, int64_t rows, int64_t C,
                    bool accumulate) {
  parallel_for(rows, 16, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) norm_row_bwd(dh + r * C, h + r * C, rstd[r], dx + r * C, C, accumulate);
  });
}

void adaln_fwd(const float* x, int64_t B, int64_t T, int64_t C, float eps, Modulation m, float* h, float* rstd,
               float* a) {
  parallel_for(B * T, 16, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t b = r / T;
      const float* shift = m.shift + b * m.ld;
      const float* scale = m.scale + b * m.ld;
      float* hr = h + r * C;
      float* ar = a + r * C;
      rstd[r] = norm_row(x + r * C, hr, C, eps);
      for (int64_t c = 0; c < C; ++c) ar[c] = hr[c] * (1.0f + scale[c]) + shift[c];
    }
  });
}

void adaln_bwd(const float* da, const float* h, const float* rstd, int64_t B, int64_t T, int64_t C, Modulation m,
               float* dshift, float* dscale, int64_t dld, float* dx) {
  parallel_for(B, 1, [&](int64_t b0, int64_t b1) {
    std::vector<float> dh(static_cast<size_t>(C));
    for (int64_t b = b0; b < b1; ++b) {
      const float* scale = m.scale + b * m.ld;
      float* dsh = dshift + b * dld;
      float* dsc = dscale + b * dld;
      std::memset(dsh, 0, static_cast<size_t>(C) * sizeof(float));
      std::memset(dsc, 0, static_cast<size_t>(C) * sizeof(float));
      for (int64_t r = b * T; r < (b + 1) * T; ++r) {
        const float* dar = da + r * C;
        const float* hr = h + r * C;
        for (int64_t c = 0; c < C; ++c) {
          dsh[c] += dar[c];
          dsc[c] += dar[c] * hr[c];
          dh[static_cast<size_t>(c)] = dar[c] * (1.0f + scale[c]);
        }
        norm_row_bwd(dh.data(), hr, rstd[r], dx + r * C, C, true);
      }
    }
  });
}

}  // namespace temper::flow
