#include "temper/flow/dit_ops.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "temper/core/profile.h"
#include "temper/core/thread_pool.h"
#include "temper/flow/dit_simd.h"
#include "temper/kernels/bias.h"
#include "temper/kernels/block_reduce.h"
#include "temper/kernels/cpu/isa_table.h"

namespace temper::flow {
namespace {

// A row of ones: GELU as GeGLU's gelu(gate) * up with up = 1.
const float* ones(int64_t n) {
  static thread_local std::vector<float> v;
  if (static_cast<int64_t>(v.size()) < n) v.assign(static_cast<size_t>(n), 1.0f);
  return v.data();
}

TEMPER_DIT_CLONES void add_bias_rows(float* u, const float* b, int64_t r0, int64_t r1, int64_t F) {
  for (int64_t r = r0; r < r1; ++r) {
    float* row = u + r * F;
#pragma omp simd
    for (int64_t f = 0; f < F; ++f) row[f] += b[f];
  }
}

TEMPER_DIT_CLONES void col_sums(const float* d, int64_t r0, int64_t r1, int64_t F, float* part) {
  for (int64_t r = r0; r < r1; ++r) {
    const float* row = d + r * F;
#pragma omp simd
    for (int64_t f = 0; f < F; ++f) part[f] += row[f];
  }
}

TEMPER_DIT_CLONES void gated_rows(float* x, const float* gate, int64_t gld, const float* y, const float* bias,
                                  int64_t r0, int64_t r1, int64_t T, int64_t C) {
  for (int64_t r = r0; r < r1; ++r) {
    const float* g = gate + (r / T) * gld;
    float* xr = x + r * C;
    const float* yr = y + r * C;
    if (bias) {
#pragma omp simd
      for (int64_t c = 0; c < C; ++c) xr[c] += g[c] * (yr[c] + bias[c]);
    } else {
#pragma omp simd
      for (int64_t c = 0; c < C; ++c) xr[c] += g[c] * yr[c];
    }
  }
}

// Item b's rows [b*T, (b+1)*T): dgate row (written), dy, and the item's bias-gradient partial.
TEMPER_DIT_CLONES void gated_item_bwd(const float* dx, const float* g, const float* y, const float* bias, int64_t r0,
                                      int64_t r1, int64_t C, float* dg, float* dy, float* dbp) {
  std::memset(dg, 0, static_cast<size_t>(C) * sizeof(float));
  for (int64_t r = r0; r < r1; ++r) {
    const float* dxr = dx + r * C;
    const float* yr = y + r * C;
    float* dyr = dy + r * C;
#pragma omp simd
    for (int64_t c = 0; c < C; ++c) {
      dg[c] += dxr[c] * (yr[c] + (bias ? bias[c] : 0.0f));
      dyr[c] = dxr[c] * g[c];
      dbp[c] += dyr[c];
    }
  }
}

constexpr int64_t kRowBlock = 64;  // rows per bias-gradient partial

}  // namespace

void linear_fwd(const LinearView& l, const float* x, int64_t N, float* y, kernels::Precision p) {
  TEMPER_PROFILE("dit.linear_fwd");
  kernels::gemm(false, true, N, l.out, l.in, x, l.in, l.w, l.in, 0.f, y, l.out, p);
  if (l.b) parallel_for(N, 16, [&](int64_t r0, int64_t r1) { add_bias_rows(y, l.b, r0, r1, l.out); });
}

void linear_bwd(const LinearView& l, const float* x, const float* dy, int64_t N, float* dw, float* db, float* dx,
                bool dx_accumulate, kernels::Precision p) {
  TEMPER_PROFILE("dit.linear_bwd");
  kernels::gemm(true, false, l.out, l.in, N, dy, l.out, x, l.in, 1.f, dw, l.in, p);
  if (db)
    kernels::block_reduce_rows(N, kRowBlock, l.out, db,
                               [&](int64_t r0, int64_t r1, float* part) { col_sums(dy, r0, r1, l.out, part); });
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

void gelu_bias_fwd(float* u, const float* b, float* g, int64_t N, int64_t F) {
  TEMPER_PROFILE("dit.gelu");
  const kernels::IsaTable& t = kernels::isa_table();
  parallel_for(N, 16, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      add_bias_rows(u, b, r, r + 1, F);
      t.geglu_fwd(u + r * F, ones(F), g + r * F, F);
    }
  });
}

void gelu_bias_bwd(const float* u, const float* dg, float* du, float* db, int64_t N, int64_t F) {
  TEMPER_PROFILE("dit.gelu");
  const kernels::IsaTable& t = kernels::isa_table();
  kernels::block_reduce_rows(N, kRowBlock, F, db, [&](int64_t r0, int64_t r1, float* part) {
    static thread_local std::vector<float> dup;
    if (static_cast<int64_t>(dup.size()) < F) dup.resize(static_cast<size_t>(F));
    for (int64_t r = r0; r < r1; ++r) t.geglu_bwd(u + r * F, ones(F), dg + r * F, du + r * F, dup.data(), F);
    col_sums(du, r0, r1, F, part);
  });
}

void gated_add_fwd(float* x, const float* gate, int64_t gld, const float* y, const float* bias, int64_t B, int64_t T,
                   int64_t C) {
  TEMPER_PROFILE("dit.gate");
  parallel_for(B * T, 16, [&](int64_t r0, int64_t r1) { gated_rows(x, gate, gld, y, bias, r0, r1, T, C); });
}

void gated_add_bwd(const float* dx, const float* gate, int64_t gld, const float* y, const float* bias, int64_t B,
                   int64_t T, int64_t C, float* dgate, int64_t dld, float* dy, float* db) {
  TEMPER_PROFILE("dit.gate");
  static thread_local std::vector<float> scratch;  // a bias-gradient partial per item when db is null
  float* sink = nullptr;
  if (!db) {
    scratch.assign(static_cast<size_t>(C), 0.f);
    sink = scratch.data();
  }
  // One block per item: its dgate row and its partial of db, added in item order.
  kernels::block_reduce_rows(B * T, T, C, db ? db : sink, [&](int64_t r0, int64_t r1, float* part) {
    const int64_t b = r0 / T;
    gated_item_bwd(dx, gate + b * gld, y, bias, r0, r1, C, dgate + b * dld, dy, part);
  });
}

}  // namespace temper::flow
