// Rotary embedding on the device, HF rotate-half convention, in place (see kernels/rope.h):
// x1' = x1 cos - x2 sin, x2' = x2 cos + x1 sin for the pair (i, i + D/2); backward rotates by -angle.
#include "temper/core/error.h"
#include "temper/kernels/cuda/common.cuh"
#include "temper/kernels/cuda/ops.h"

namespace temper::cuda {
namespace {

// The rotation of one pair, shared by every kernel here; products and sums rounded one by one (no
// contraction into FMAs, whose choice could differ between kernels), so they round alike.
__device__ __forceinline__ void rotate(float& x1, float& x2, float c, float sn) {
  const float a = x1, b = x2;
  x1 = __fsub_rn(__fmul_rn(a, c), __fmul_rn(b, sn));
  x2 = __fadd_rn(__fmul_rn(b, c), __fmul_rn(a, sn));
}

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
    float x1 = dev::ld(xp, i), x2 = dev::ld(xp, i + half);
    rotate(x1, x2, c, sn);
    dev::st(xp, i, x1);
    dev::st(xp, i + half, x2);
  }
}

__device__ __forceinline__ float round_bf16(float x) {
  return __bfloat162float(__float2bfloat16_rn(x));
}

// One thread per pair (i, i + D/2) of a head: query heads rotated in place; key heads rotated and
// rounded to bf16 values; value heads rounded; keys and values written to the row's paged slot too.
__global__ void rope_kv_write_kernel(float* qkv, int64_t ld, const int32_t* pos, const float* cos_t, const float* sin_t,
                                     int64_t n, int64_t H, int64_t Hkv, int64_t D, const int32_t* tables,
                                     int64_t table_stride, int64_t block_size, float* k_pool, float* v_pool) {
  const int64_t half = D / 2, heads = H + 2 * Hkv, total = n * heads * half, row_floats = Hkv * D;
  for (int64_t idx = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; idx < total;
       idx += int64_t{gridDim.x} * blockDim.x) {
    const int64_t i = idx % half, h = (idx / half) % heads, r = idx / (half * heads);
    const int64_t p = pos[r];
    float* xp = qkv + r * ld + h * D;
    float x1 = xp[i], x2 = xp[i + half];
    if (h < H + Hkv) rotate(x1, x2, cos_t[p * half + i], sin_t[p * half + i]);
    if (h >= H) {
      x1 = round_bf16(x1);
      x2 = round_bf16(x2);
      const int64_t slot = int64_t{tables[r * table_stride + p / block_size]} * block_size + p % block_size;
      const bool key = h < H + Hkv;
      float* dst = (key ? k_pool : v_pool) + slot * row_floats + (h - H - (key ? 0 : Hkv)) * D;
      dst[i] = x1;
      dst[i + half] = x2;
    }
    xp[i] = x1;
    xp[i + half] = x2;
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
void rope_kv_write(float* qkv, int64_t ld, const int32_t* pos, const float* cos, const float* sin, int64_t n, int64_t H,
                   int64_t Hkv, int64_t D, const int32_t* tables, int64_t table_stride, int64_t block_size,
                   float* k_pool, float* v_pool, cudaStream_t s) {
  if (n <= 0) return;
  TEMPER_CHECK(D % 2 == 0 && H > 0 && Hkv > 0) << "rope_kv_write: head dim " << D << ", heads " << H << "/" << Hkv;
  rope_kv_write_kernel<<<dev::blocks_for(n * (H + 2 * Hkv) * (D / 2), 256), 256, 0, s>>>(
      qkv, ld, pos, cos, sin, n, H, Hkv, D, tables, table_stride, block_size, k_pool, v_pool);
  TEMPER_CUDA_LAUNCHED("rope_kv_write");
}
void rope_bwd(float* dx, const int32_t* pos, const float* cos, const float* sin, int64_t rows, int64_t H, int64_t D,
              int64_t row_stride, cudaStream_t s) {
  if (rows <= 0) return;
  rope_kernel<float><<<dev::blocks_for(rows * H * (D / 2), 256), 256, 0, s>>>(dx, pos, cos, sin, rows, H, D, row_stride, -1.f);
  TEMPER_CUDA_LAUNCHED("rope_bwd");
}

}  // namespace temper::cuda
