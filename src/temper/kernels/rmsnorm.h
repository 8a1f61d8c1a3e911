// RMSNorm as Llama/Qwen define it (HF LlamaRMSNorm): y = x / sqrt(mean(x^2) + eps) * w, over the
// last dim C. Forward saves rstd [N] for the backward. Reference: kernels/ref/rmsnorm_ref.h.
#pragma once

#include <cstdint>

namespace temper::kernels {

// x, y: [N, C]; w: [C]; rstd: [N]
void rmsnorm_fwd(const float* x, const float* w, float* y, float* rstd, int64_t N, int64_t C, float eps);
// dx: [N, C] (overwritten, or added to if accumulate_dx); dw: [C] accumulated (+=).
void rmsnorm_bwd(const float* dy, const float* x, const float* w, const float* rstd, float* dx, float* dw, int64_t N,
                 int64_t C, bool accumulate_dx = false);

}  // namespace temper::kernels
