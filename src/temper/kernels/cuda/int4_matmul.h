// The drafter's 4-bit weights on the device (kernels/int4_matmul.h's layout: RTN asymmetric uint4,
// one f32 scale and uint4 zero per group, rows padded to 32 inputs, llama.cpp's nibble order) and
// the dequantize-in-registers product Y[M, N] = X[M, K] W^T (+ Y) with f32 activations.
// Leaves out: int8 activations (the CPU's VNNI path), tensor-core int4 (Marlin-style) tiles.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "temper/kernels/cuda/runtime.h"
#include "temper/kernels/int4_matmul.h"

namespace temper::cuda {

class Int4DeviceWeights {
 public:
  explicit Int4DeviceWeights(const kernels::Int4Weights& w);  // uploads (synchronous)
  void upload(const kernels::Int4Weights& w);  // replaces the weights (buffers reused when the sizes match)
  int64_t N = 0, K = 0, Kp = 0, group = 0;
  const uint8_t* q() const { return q_.data(); }
  const float* scale() const { return scale_.data(); }
  const uint8_t* zero() const { return zero_.data(); }

 private:
  DeviceBuffer<uint8_t> q_, zero_;
  DeviceBuffer<float> scale_;
};

// A warp per output column: each lane dequantizes its 32-input chunks once and applies them to up to 8 rows.
void int4_gemm(int64_t M, const float* X, int64_t ldx, const Int4DeviceWeights& W, bool accumulate, float* Y,
               int64_t ldy, cudaStream_t s);
// int4_gemm_bf16: the same product over bf16 activations (the CUDA model's linear inputs), with the linear's
// bias and residual addend fused: Y = X W^T (+ bias) (+ addend, which may not alias Y).
void int4_gemm_bf16(int64_t M, const uint16_t* X, int64_t ldx, const Int4DeviceWeights& W, float* Y, int64_t ldy,
                    const float* bias, const float* addend, cudaStream_t s);

}  // namespace temper::cuda
