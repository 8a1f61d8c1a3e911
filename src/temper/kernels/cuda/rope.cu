// Rotary embedding on the device, HF rotate-half convention, in place (see kernels/rope.h):
// x1' = x1 cos - x2 sin, x2' = x2 cos + x1 sin for the pair (i, i + D/2); backward rotates by -angle.
#include "temper/kernels/cuda/common.cuh"
#include "temper/kernels/cuda/ops.h"

namespace temper::cuda {
namespace {

template <class T>
__global__ void rope_kernel(T* x, const int32_t* pos, const float* cos_t, const float* sin_t, int64_t rows, int64_t H,
                            int64_t D, int64_t row_stride, float sign) {
  const int64_t half = D / 2;
  const int64_t total = rows * H * half;
  for (int64_t idx = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; idx < total;
       idx += int64_t{gridDim.x} * blockDim.x) {
    const int64_t i = idx % half, h = (idx / half) % H, r = idx / (half * H);
    const int64_t p = pos[r];
    const float c = cos_t[p * half + i], sn = sign * sin_t[p * half + i];
    T* xp = x + r * row_stride + h * D;
    const float x1 = dev::ld(xp, i), x2 = dev::ld(xp, i + half);
    dev::st(xp, i, x1 * c - x2 * sn);
    dev::st(xp, i + half, x2 * c + x1 * sn);
  }
}

}  // namespace

void rope_fwd(float* x, const int32_t* pos, const float* cos, const float* sin, int64_t rows, int64_t H, int64_t D,
              int64_t row_stride, cudaStream_t s) {
  if (rows <= 0) return;
  rope_kernel<float><<<dev::blocks_for(rows * H * (D / 2), 256), 256, 0, s>>>(x, pos, cos, sin, rows, H, D, row_stride, 1.f);
  TEMPER_CUDA_LAUNCHED("rope_fwd");
}
void rope_fwd(uint16_t* x, const int32_t* pos, const float* cos, const float* sin, int64_t rows, int64_t H, int64_t D,
              int64_t row_stride, cudaStream_t s) {
  if (rows <= 0) return;
  rope_kernel<__nv_bfloat16>
      <<<dev::blocks_for(rows * H * (D / 2), 256), 256, 0, s>>>(dev::bf(x), pos, cos, sin, rows, H, D, row_stride, 1.f);
  TEMPER_CUDA_LAUNCHED("rope_fwd_bf16");
}
void rope_bwd(float* dx, const int32_t* pos, const float* cos, const float* sin, int64_t rows, int64_t H, int64_t D,
              int64_t row_stride, cudaStream_t s) {
  if (rows <= 0) return;
  rope_kernel<float><<<dev::blocks_for(rows * H * (D / 2), 256), 256, 0, s>>>(dx, pos, cos, sin, rows, H, D, row_stride, -1.f);
  TEMPER_CUDA_LAUNCHED("rope_bwd");
}

}  // namespace temper::cuda
