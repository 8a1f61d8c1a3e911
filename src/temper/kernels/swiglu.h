// SwiGLU activation of the Llama MLP: h = silu(gate) * up (HF LlamaMLP: down(act(gate(x)) * up(x))).
// gate and up come from one GEMM with the fused [gate; up] weight, so row n of gu [N, 2F] holds
// gate in columns [0, F) and up in [F, 2F). The projections are GEMMs (matmul.h).
#pragma once

#include <cstdint>

namespace temper::kernels {

void swiglu_fwd(const float* gu, float* h, int64_t N, int64_t F);                // h [N, F]
void swiglu_bwd(const float* gu, const float* dh, float* dgu, int64_t N, int64_t F);  // dgu [N, 2F]

}  // namespace temper::kernels
