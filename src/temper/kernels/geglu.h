// GeGLU activation of the Gemma MLP: h = gelu_tanh(gate) * up (HF GemmaMLP: down(act(gate(x)) * up(x)),
// act = gelu_pytorch_tanh, torch's gelu(approximate='tanh') in f32). gu [N, 2F] holds gate in columns
// [0, F) and up in [F, 2F) of each row, as swiglu.h. The projections are GEMMs (matmul.h).
#pragma once

#include <cstdint>

namespace temper::kernels {

void geglu_fwd(const float* gu, float* h, int64_t N, int64_t F);                     // h [N, F]
void geglu_bwd(const float* gu, const float* dh, float* dgu, int64_t N, int64_t F);  // dgu [N, 2F]

}  // namespace temper::kernels
