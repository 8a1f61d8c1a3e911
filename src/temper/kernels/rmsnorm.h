// RMSNorm as Llama/Qwen define it (HF LlamaRMSNorm): y = x / sqrt(mean(x^2) + eps) * w, over the
// last dim C. Forward saves rstd [N] for the backward. Reference: kernels/ref/rmsnorm_ref.h.
#pragma once

#include <cstdint>

namespace temper::kernels {

// x, y: [N, C]; w: [C]; rstd: [N]
void rmsnorm_fwd(const float* x, const float* w, float* y, float* rstd, int64_t N, int64_t C, float eps);
// dx: [N, C] (overwritten, or added to if accumulate_dx); dw: [C] accumulated (+=), or null (a frozen weight).
void rmsnorm_bwd(const float* dy, const float* x, const float* w, const float* rstd, float* dx, float* dw, int64_t N,
                 int64_t C, bool accumulate_dx = false);

// Per-head RMSNorm (Qwen3 q_norm/k_norm): token n's H heads of D start at x + n*stride; w [D].
// rstd [N, H]. In place is allowed (y == x). dw accumulated (or null); dx overwritten (may alias dy).
void rmsnorm_heads_fwd(const float* x, const float* w, float* y, float* rstd, int64_t N, int64_t H, int64_t D,
                       int64_t stride, float eps);
void rmsnorm_heads_bwd(const float* dy, const float* x, const float* w, const float* rstd, float* dx, float* dw,
                       int64_t N, int64_t H, int64_t D, int64_t stride);

}  // namespace temper::kernels
