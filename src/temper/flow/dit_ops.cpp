#include "temper/flow/dit_ops.h"

#include <cmath>
#include <cstring>
#include <vector>

#include "temper/core/thread_pool.h"
#include "temper/kernels/bias.h"
#include "temper/kernels/cpu/isa_table.h"

namespace temper::flow {

void linear_fwd(const LinearView& l, const float* x, int64_t N, float* y, kernels::Precision p) {
  kernels::gemm(false, true, N, l.out, l.in, x, l.in, l.w, l.in, 0.f, y, l.out, p);
  kernels::bias_add(y, l.b, N, l.out);
}

void linear_bwd(const LinearView& l, const float* x, const float* dy, int64_t N, float* dw, float* db, float* dx,
                bool dx_accumulate, kernels::Precision p) {
  kernels::gemm(true, false, l.out, l.in, N, dy, l.out, x, l.in, 1.f, dw, l.in, p);
  kernels::bias_grad(dy, db, N, l.out);
  if (dx) kernels::gemm(false, false, N, l.in, l.out, dy, l.out, l.w, l.in, dx_accumulate ? 1.f : 0.f, dx, l.in, p);
}

void silu_fwd(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] / (1.0f + std::exp(-x[i]));
}

void silu_bwd(const float* x, const float* dy, float* dx, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float s = 1.0f / (1.0f + std::exp(-x[i]));
    dx[i] = dy[i] * s * (1.0f + x[i] * (1.0f - s));
  }
}

namespace {
// A row of ones: GELU as GeGLU's gelu(gate) * up with up = 1.
const float* ones(int64_t n) {
  static thread_local std::vector<float> v;
  if (static_cast<int64_t>(v.size()) < n) v.assign(static_cast<size_t>(n), 1.0f);
  return v.data();
}
constexpr int64_t kChunk = 4096;
}  // namespace

void gelu_fwd(const float* x, float* y, int64_t n) {
  const kernels::IsaTable& t = kernels::isa_table();
  parallel_for((n + kChunk - 1) / kChunk, 1, [&](int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c) {
      const int64_t b = c * kChunk, len = std::min(kChunk, n - b);
      t.geglu_fwd(x + b, ones(len), y + b, len);
    }
  });
}

void gelu_bwd(const float* x, const float* dy, float* dx, int64_t n) {
  const kernels::IsaTable& t = kernels::isa_table();
  parallel_for((n + kChunk - 1) / kChunk, 1, [&](int64_t c0, int64_t c1) {
    static thread_local std::vector<float> dup;
    if (static_cast<int64_t>(dup.size()) < kChunk) dup.resize(kChunk);
    for (int64_t c = c0; c < c1; ++c) {
      const int64_t b = c * kChunk, len = std::min(kChunk, n - b);
      t.geglu_bwd(x + b, ones(len), dy + b, dx + b, dup.data(), len);
    }
  });
}

void gated_add_fwd(float* x, const float* gate, int64_t gld, const float* y, int64_t B, int64_t T, int64_t C) {
  parallel_for(B * T, 16, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const float* g = gate + (r / T) * gld;
      float* xr = x + r * C;
      const float* yr = y + r * C;
      for (int64_t c = 0; c < C; ++c) xr[c] += g[c] * yr[c];
    }
  });
}

void gated_add_bwd(const float* dx, const float* gate, int64_t gld, const float* y, int64_t B, int64_t T, int64_t C,
                   float* dgate, int64_t dld, float* dy) {
  parallel_for(B, 1, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      const float* g = gate + b * gld;
      float* dg = dgate + b * dld;
      std::memset(dg, 0, static_cast<size_t>(C) * sizeof(float));
      for (int64_t r = b * T; r < (b + 1) * T; ++r) {
        const float* dxr = dx + r * C;
        const float* yr = y + r * C;
        float* dyr = dy + r * C;
        for (int64_t c = 0; c < C; ++c) {
          dg[c] += dxr[c] * yr[c];
          dyr[c] = dxr[c] * g[c];
        }
      }
    }
  });
}

}  // namespace temper::flow
