// SwiGLU on the device: h = silu(gate) * up over gu = [gate | up] rows (see kernels/swiglu.h).
// Backward: dgate = dh * up * sig(g) * (1 + g (1 - sig(g))), dup = dh * silu(g).
#include "temper/kernels/cuda/common.cuh"
#include "temper/kernels/cuda/ops.h"

namespace temper::cuda {
namespace {

template <class Tin, class Tout>
__global__ void swiglu_fwd_kernel(const Tin* gu, Tout* h, int64_t N, int64_t F) {
  for (int64_t idx = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; idx < N * F; idx += int64_t{gridDim.x} * blockDim.x) {
    const int64_t n = idx / F, f = idx % F;
    const float g = dev::ld(gu, n * 2 * F + f), u = dev::ld(gu, n * 2 * F + F + f);
    const float sig = 1.f / (1.f + expf(-g));
    dev::st(h, idx, g * sig * u);
  }
}

__global__ void swiglu_bwd_kernel(const float* gu, const float* dh, float* dgu, int64_t N, int64_t F) {
  for (int64_t idx = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; idx < N * F; idx += int64_t{gridDim.x} * blockDim.x) {
    const int64_t n = idx / F, f = idx % F;
    const float g = gu[n * 2 * F + f], u = gu[n * 2 * F + F + f], d = dh[idx];
    const float sig = 1.f / (1.f + expf(-g));
    dgu[n * 2 * F + f] = d * u * sig * (1.f + g * (1.f - sig));
    dgu[n * 2 * F + F + f] = d * g * sig;
  }
}

}  // namespace

void swiglu_fwd(const float* gu, float* h, int64_t N, int64_t F, cudaStream_t s) {
  if (N * F <= 0) return;
  swiglu_fwd_kernel<float, float><<<dev::blocks_for(N * F, 256), 256, 0, s>>>(gu, h, N, F);
  TEMPER_CUDA_LAUNCHED("swiglu_fwd");
}
void swiglu_fwd(const uint16_t* gu, uint16_t* h, int64_t N, int64_t F, cudaStream_t s) {
  if (N * F <= 0) return;
  swiglu_fwd_kernel<__nv_bfloat16, __nv_bfloat16><<<dev::blocks_for(N * F, 256), 256, 0, s>>>(dev::bf(gu), dev::bf(h), N, F);
  TEMPER_CUDA_LAUNCHED("swiglu_fwd_bf16");
}
void swiglu_fwd(const float* gu, uint16_t* h, int64_t N, int64_t F, cudaStream_t s) {
  if (N * F <= 0) return;
  swiglu_fwd_kernel<float, __nv_bfloat16><<<dev::blocks_for(N * F, 256), 256, 0, s>>>(gu, dev::bf(h), N, F);
  TEMPER_CUDA_LAUNCHED("swiglu_fwd_f32_bf16");
}
void swiglu_bwd(const float* gu, const float* dh, float* dgu, int64_t N, int64_t F, cudaStream_t s) {
  if (N * F <= 0) return;
  swiglu_bwd_kernel<<<dev::blocks_for(N * F, 256), 256, 0, s>>>(gu, dh, dgu, N, F);
  TEMPER_CUDA_LAUNCHED("swiglu_bwd");
}

}  // namespace temper::cuda
