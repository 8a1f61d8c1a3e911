// Reference RMSNorm (obviously correct, any float type), the oracle for the fast kernel.
#pragma once

#include <cmath>
#include <cstdint>

namespace temper::kernels::ref {

template <class T>
void rmsnorm_fwd(const T* x, const T* w, T* y, int64_t N, int64_t C, T eps) {
  for (int64_t r = 0; r < N; ++r) {
    T ms = 0;
    for (int64_t c = 0; c < C; ++c) ms += x[r * C + c] * x[r * C + c];
    T rs = T(1) / std::sqrt(ms / T(C) + eps);
    for (int64_t c = 0; c < C; ++c) y[r * C + c] = x[r * C + c] * rs * w[c];
  }
}

template <class T>
void rmsnorm_bwd(const T* dy, const T* x, const T* w, T* dx, T* dw, int64_t N, int64_t C, T eps) {
  for (int64_t r = 0; r < N; ++r) {
    T ms = 0;
    for (int64_t c = 0; c < C; ++c) ms += x[r * C + c] * x[r * C + c];
    T rs = T(1) / std::sqrt(ms / T(C) + eps);
    T s = 0;
    for (int64_t c = 0; c < C; ++c) s += dy[r * C + c] * w[c] * x[r * C + c];
    for (int64_t c = 0; c < C; ++c) {
      dx[r * C + c] = rs * dy[r * C + c] * w[c] - s * rs * rs * rs / T(C) * x[r * C + c];
      dw[c] += dy[r * C + c] * x[r * C + c] * rs;
    }
  }
}

}  // namespace temper::kernels::ref
