// Bias of a linear layer (Qwen2's q/k/v projections): y[n] += b, and db += column sums of dy,
// summed over fixed row blocks in a fixed order (thread-count independent).
#pragma once

#include <cstdint>

namespace temper::kernels {

void bias_add(float* y, const float* b, int64_t N, int64_t M);         // y [N, M], b [M]
void bias_grad(const float* dy, float* db, int64_t N, int64_t M);      // db [M] accumulated

}  // namespace temper::kernels
