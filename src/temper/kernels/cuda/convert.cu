// f32 <-> bf16 on the device (round to nearest even). See ops.h.
#include "temper/kernels/cuda/common.cuh"
#include "temper/kernels/cuda/ops.h"

namespace temper::cuda {
namespace {
__global__ void f32_to_bf16_kernel(const float* x, __nv_bfloat16* y, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x)
    y[i] = __float2bfloat16_rn(x[i]);
}
__global__ void bf16_to_f32_kernel(const __nv_bfloat16* x, float* y, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x)
    y[i] = __bfloat162float(x[i]);
}
__global__ void round_bf16_rows_kernel(float* x, int64_t rows, int64_t cols, int64_t ld) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < rows * cols;
       i += int64_t{gridDim.x} * blockDim.x) {
    float* p = x + (i / cols) * ld + i % cols;
    *p = __bfloat162float(__float2bfloat16_rn(*p));
  }
}
}  // namespace

void round_bf16_rows(float* x, int64_t rows, int64_t cols, int64_t ld, cudaStream_t s) {
  if (rows <= 0 || cols <= 0) return;
  round_bf16_rows_kernel<<<dev::blocks_for(rows * cols, 256), 256, 0, s>>>(x, rows, cols, ld);
  TEMPER_CUDA_LAUNCHED("round_bf16_rows");
}
void f32_to_bf16(const float* x, uint16_t* y, int64_t n, cudaStream_t s) {
  if (n <= 0) return;
  f32_to_bf16_kernel<<<dev::blocks_for(n, 256), 256, 0, s>>>(x, dev::bf(y), n);
  TEMPER_CUDA_LAUNCHED("f32_to_bf16");
}
void bf16_to_f32(const uint16_t* x, float* y, int64_t n, cudaStream_t s) {
  if (n <= 0) return;
  bf16_to_f32_kernel<<<dev::blocks_for(n, 256), 256, 0, s>>>(dev::bf(x), y, n);
  TEMPER_CUDA_LAUNCHED("bf16_to_f32");
}
}  // namespace temper::cuda
