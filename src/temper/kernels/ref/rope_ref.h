// Reference RoPE in the HF rotate-half convention, computing angles in T from scratch.
#pragma once

#include <cmath>
#include <cstdint>

namespace temper::kernels::ref {

// x: [rows, H, D] (dense); forward rotation (or its transpose if inverse).
template <class T>
void rope(T* x, const int32_t* pos, int64_t rows, int64_t H, int64_t D, double theta, bool inverse) {
  int64_t half = D / 2;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t h = 0; h < H; ++h) {
      T* a = x + (r * H + h) * D;
      for (int64_t i = 0; i < half; ++i) {
        float inv_freq = 1.0f / std::pow(static_cast<float>(theta), static_cast<float>(2 * i) / static_cast<float>(D));
        double ang = static_cast<double>(static_cast<float>(pos[r]) * inv_freq);
        T c = static_cast<T>(std::cos(ang)), s = static_cast<T>(std::sin(ang)) * (inverse ? T(-1) : T(1));
        T x1 = a[i], x2 = a[i + half];
        a[i] = x1 * c - x2 * s;
        a[i + half] = x2 * c + x1 * s;
      }
    }
}

}  // namespace temper::kernels::ref
