// Reference AdamW (torch.optim.AdamW, single tensor, non-amsgrad) in T.
#pragma once

#include <cmath>
#include <cstdint>

namespace temper::kernels::ref {

template <class T>
void adamw_step(T* p, const T* g, T* m, T* v, int64_t n, T lr, T b1, T b2, T eps, T wd, int64_t step) {
  T bc1 = T(1) - std::pow(b1, T(step)), bc2 = T(1) - std::pow(b2, T(step));
  for (int64_t i = 0; i < n; ++i) {
    p[i] *= T(1) - lr * wd;
    m[i] = b1 * m[i] + (T(1) - b1) * g[i];
    v[i] = b2 * v[i] + (T(1) - b2) * g[i] * g[i];
    p[i] -= lr / bc1 * m[i] / (std::sqrt(v[i]) / std::sqrt(bc2) + eps);
  }
}

}  // namespace temper::kernels::ref
