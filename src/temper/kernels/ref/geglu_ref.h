// Reference GeGLU: h = gelu_tanh(g) * u, gelu_tanh(x) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
// (torch.nn.functional.gelu(approximate='tanh')), and its exact derivative, in T.
#pragma once

#include <cmath>
#include <cstdint>

namespace temper::kernels::ref {

template <class T>
T gelu_tanh(T x) {
  const T beta = std::sqrt(T(2) / T(M_PI)), kappa = T(0.044715);
  return T(0.5) * x * (T(1) + std::tanh(beta * (x + kappa * x * x * x)));
}

template <class T>
void geglu_fwd(const T* g, const T* u, T* h, int64_t n) {
  for (int64_t i = 0; i < n; ++i) h[i] = gelu_tanh(g[i]) * u[i];
}

template <class T>
void geglu_bwd(const T* g, const T* u, const T* dh, T* dg, T* du, int64_t n) {
  const T beta = std::sqrt(T(2) / T(M_PI)), kappa = T(0.044715);
  for (int64_t i = 0; i < n; ++i) {
    const T x = g[i], t = std::tanh(beta * (x + kappa * x * x * x));
    const T dgelu = T(0.5) * (T(1) + t) + T(0.5) * x * (T(1) - t * t) * beta * (T(1) + T(3) * kappa * x * x);
    du[i] = dh[i] * gelu_tanh(x);
    dg[i] = dh[i] * u[i] * dgelu;
  }
}

}  // namespace temper::kernels::ref
