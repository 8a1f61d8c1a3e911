// The DiT's small pieces around the products: a linear layer (torch.nn.Linear: y = x W^T + b on
// kernels::gemm) with its backward, SiLU, GELU(tanh) with the fc1 bias folded in, and adaLN-Zero's gated
// residual x += gate[b] * (y + bias) (one gate row per item b over its T token rows; the bias of the layer
// that made y folded in, so y is the product alone). Bias gradients are column sums over fixed row blocks
// added in block order, and per-item sums run in row order inside one task: the same bits for any thread
// count. Leaves out: dropout, other activations.
#pragma once

#include <cstdint>

#include "temper/kernels/matmul.h"

namespace temper::flow {

struct LinearView {
  const float* w;  // [out, in]
  const float* b;  // [out]; nullptr: the caller adds the bias (folded into the next op)
  int64_t in, out;
};

// y [N, out] = x [N, in] W^T (+ b)
void linear_fwd(const LinearView& l, const float* x, int64_t N, float* y, kernels::Precision p);
// dw += dy^T x, db += colsum(dy) when db is not null; dx = dy W (+ dx when dx_accumulate) when dx is not null.
void linear_bwd(const LinearView& l, const float* x, const float* dy, int64_t N, float* dw, float* db, float* dx,
                bool dx_accumulate, kernels::Precision p);

void silu_fwd(const float* x, float* y, int64_t n);
void silu_bwd(const float* x, const float* dy, float* dx, int64_t n);  // dx = dy * silu'(x)

// u [N, F] += b (in place: the pre-activation the backward reads), g = gelu_tanh(u) (torch's approximate="tanh"
// through the per-ISA GeGLU kernels with up = 1).
void gelu_bias_fwd(float* u, const float* b, float* g, int64_t N, int64_t F);
// du = dg * gelu'(u) (du may be dg), db += colsum(du).
void gelu_bias_bwd(const float* u, const float* dg, float* du, float* db, int64_t N, int64_t F);

// x [B*T, C] += gate[b] * (y + bias), gate row b at gate + b * gld; bias may be null.
void gated_add_fwd(float* x, const float* gate, int64_t gld, const float* y, const float* bias, int64_t B, int64_t T,
                   int64_t C);
// dgate[b] = sum over the item's rows of dx * (y + bias) (written, row b at dgate + b * dld); dy = dx * gate[b];
// db += colsum(dy) when db is not null.
void gated_add_bwd(const float* dx, const float* gate, int64_t gld, const float* y, const float* bias, int64_t B,
                   int64_t T, int64_t C, float* dgate, int64_t dld, float* dy, float* db);

}  // namespace temper::flow
