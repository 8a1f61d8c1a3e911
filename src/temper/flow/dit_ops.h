// The DiT's small pieces around the products: a linear layer (torch.nn.Linear: y = x W^T + b on
// kernels::gemm) with its backward, SiLU and GELU(tanh) with theirs, and adaLN-Zero's gated residual
// x += gate[b] * y (one gate row per item b over its T token rows). Reductions over an item's rows run in
// row order inside one task: the same bits for any thread count. Leaves out: dropout, other activations.
#pragma once

#include <cstdint>

#include "temper/kernels/matmul.h"

namespace temper::flow {

struct LinearView {
  const float* w;  // [out, in]
  const float* b;  // [out]
  int64_t in, out;
};

// y [N, out] = x [N, in] W^T + b
void linear_fwd(const LinearView& l, const float* x, int64_t N, float* y, kernels::Precision p);
// dw += dy^T x, db += colsum(dy); dx = dy W (+ dx when dx_accumulate) when dx is not null.
void linear_bwd(const LinearView& l, const float* x, const float* dy, int64_t N, float* dw, float* db, float* dx,
                bool dx_accumulate, kernels::Precision p);

void silu_fwd(const float* x, float* y, int64_t n);
void silu_bwd(const float* x, const float* dy, float* dx, int64_t n);  // dx = dy * silu'(x)
// torch.nn.functional.gelu(approximate="tanh") and its backward (the per-ISA GeGLU kernels with up = 1).
void gelu_fwd(const float* x, float* y, int64_t n);
void gelu_bwd(const float* x, const float* dy, float* dx, int64_t n);

// x [B*T, C] += gate[b] * y, gate row b at gate + b * gld.
void gated_add_fwd(float* x, const float* gate, int64_t gld, const float* y, int64_t B, int64_t T, int64_t C);
// dgate[b] = sum over the item's rows of dx * y (written, row b at dgate + b * dld); dy = dx * gate[b].
void gated_add_bwd(const float* dx, const float* gate, int64_t gld, const float* y, int64_t B, int64_t T, int64_t C,
                   float* dgate, int64_t dld, float* dy);

}  // namespace temper::flow
