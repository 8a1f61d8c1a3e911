#include "temper/kernels/rope.h"

#include <cmath>

#include "temper/core/error.h"
#include "temper/core/thread_pool.h"
#include "temper/kernels/cpu/isa_table.h"

namespace temper::kernels {

RopeTable rope_table(int64_t max_pos, int64_t D, double theta) {
  TEMPER_CHECK(D % 2 == 0) << "RoPE needs an even head dim, got " << D;
  RopeTable t;
  t.max_pos = max_pos;
  t.half = D / 2;
  t.cos.resize(static_cast<size_t>(max_pos * t.half));
  t.sin.resize(static_cast<size_t>(max_pos * t.half));
  for (int64_t i = 0; i < t.half; ++i) {
    // HF: inv_freq = 1 / base ** (arange(0, D, 2).float() / D), in float32.
    float expo = static_cast<float>(2 * i) / static_cast<float>(D);
    float inv_freq = 1.0f / std::pow(static_cast<float>(theta), expo);
    for (int64_t p = 0; p < max_pos; ++p) {
      float f = static_cast<float>(p) * inv_freq;  // float32 product, as HF's matmul of float tensors
      t.cos[static_cast<size_t>(p * t.half + i)] = static_cast<float>(std::cos(static_cast<double>(f)));
      t.sin[static_cast<size_t>(p * t.half + i)] = static_cast<float>(std::sin(static_cast<double>(f)));
    }
  }
  return t;
}

namespace {
void rope_apply(float* x, const int32_t* pos, const RopeTable& t, int64_t rows, int64_t H, int64_t D,
                int64_t row_stride, bool inverse) {
  TEMPER_CHECK(D / 2 == t.half) << "RoPE table built for head dim " << 2 * t.half << ", used with " << D;
  for (int64_t r = 0; r < rows; ++r)
    TEMPER_CHECK(pos[r] >= 0 && pos[r] < t.max_pos) << "position " << pos[r] << " outside RoPE table [0, " << t.max_pos << ")";
  const IsaTable& k = isa_table();
  parallel_for(rows, 8, [&](int64_t b, int64_t e) {
    k.rope(x + b * row_stride, pos + b, t.cos.data(), t.sin.data(), e - b, H, D, row_stride, inverse);
  });
}
}  // namespace

void rope_fwd(float* x, const int32_t* pos, const RopeTable& t, int64_t rows, int64_t H, int64_t D, int64_t row_stride) {
  rope_apply(x, pos, t, rows, H, D, row_stride, false);
}

void rope_bwd(float* dx, const int32_t* pos, const RopeTable& t, int64_t rows, int64_t H, int64_t D,
              int64_t row_stride) {
  rope_apply(dx, pos, t, rows, H, D, row_stride, true);
}

}  // namespace temper::kernels
