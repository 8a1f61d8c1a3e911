// SwiGLU activation of the Llama MLP: h = silu(gate) * up (HF LlamaMLP: down(act(gate(x)) * up(x))).
// The three projections are GEMMs (matmul.h); this is the elementwise part and its backward.
#pragma once

#include <cstdint>

namespace temper::kernels {

void swiglu_fwd(const float* gate, const float* up, float* h, int64_t n);
void swiglu_bwd(const float* gate, const float* up, const float* dh, float* dgate, float* dup, int64_t n);

}  // namespace temper::kernels
