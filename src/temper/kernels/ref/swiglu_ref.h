// Reference SwiGLU.
#pragma once

#include <cmath>
#include <cstdint>

namespace temper::kernels::ref {

template <class T>
void swiglu_fwd(const T* g, const T* u, T* h, int64_t n) {
  for (int64_t i = 0; i < n; ++i) h[i] = g[i] / (T(1) + std::exp(-g[i])) * u[i];
}

template <class T>
void swiglu_bwd(const T* g, const T* u, const T* dh, T* dg, T* du, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    T s = T(1) / (T(1) + std::exp(-g[i]));
    du[i] = dh[i] * g[i] * s;
    dg[i] = dh[i] * u[i] * (s + g[i] * s * (T(1) - s));
  }
}

}  // namespace temper::kernels::ref
