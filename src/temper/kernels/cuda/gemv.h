// The decode-sized product on the GPU: Y[M, N] = X[M, K] W^T (+ bias[N]) (+ beta * C_in) for a few
// rows (M <= kGemvMaxRows) of bf16 activations against a bf16 Linear weight W [N, K], f32
// accumulation and output. Leaves out: K not a multiple of 8 (callers fall back to cuBLASLt), bf16
// output.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace temper::cuda {

constexpr int64_t kGemvMaxRows = 8;

// Whether gemv_bf16 takes this shape (rows, K and 16-byte alignment of X and W).
bool gemv_fits(int64_t M, int64_t K, const void* x, const void* w);

// A warp per output column reads the weight row once in 16-byte loads and applies it to every row, so
// the weight streams from HBM once per step; cuBLASLt's small-M kernels run at 1/5 of the bandwidth on
// these shapes (5.6-8.8 us per projection of Qwen2.5-0.5B at one row, docs/CUDA.md). Fixed summation
// order: deterministic.
// y[m * N + n] = sum_k x[m * K + k] w[n * K + k] + (bias ? bias[n] : 0) + beta * c_in[m * N + n]
// (c_in null: y itself; beta 0: no addend read).
void gemv_bf16(int64_t M, int64_t N, int64_t K, const uint16_t* x, const uint16_t* w, const float* bias, float beta,
               const float* c_in, float* y, cudaStream_t s);

}  // namespace temper::cuda
