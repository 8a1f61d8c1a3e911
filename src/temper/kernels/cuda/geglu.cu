// GeGLU on the device: h = gelu_tanh(gate) * up over gu = [gate | up] rows (see kernels/geglu.h), in
// torch's approximate='tanh' f32 op order with CUDA's tanhf. Backward: dgate = dh * up * gelu'(g),
// dup = dh * gelu(g), gelu' in torch's GeluBackward order.
#include <cmath>

#include "temper/kernels/cuda/common.cuh"
#include "temper/kernels/cuda/ops.h"

namespace temper::cuda {
namespace {

constexpr float kBeta = static_cast<float>(M_SQRT2 * M_2_SQRTPI * 0.5), kKappa = 0.044715f;

__device__ inline float gelu_tanh(float x) {
  return 0.5f * x * (1.f + tanhf(kBeta * (x + kKappa * (x * x * x))));
}

template <class Tin, class Tout>
__global__ void geglu_fwd_kernel(const Tin* gu, Tout* h, int64_t N, int64_t F) {
  for (int64_t idx = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; idx < N * F;
       idx += int64_t{gridDim.x} * blockDim.x) {
    const int64_t n = idx / F, f = idx % F;
    const float g = dev::ld(gu, n * 2 * F + f), u = dev::ld(gu, n * 2 * F + F + f);
    dev::st(h, idx, gelu_tanh(g) * u);
  }
}

__global__ void geglu_bwd_kernel(const float* gu, const float* dh, float* dgu, int64_t N, int64_t F) {
  for (int64_t idx = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; idx < N * F;
       idx += int64_t{gridDim.x} * blockDim.x) {
    const int64_t n = idx / F, f = idx % F;
    const float x = gu[n * 2 * F + f], u = gu[n * 2 * F + F + f], d = dh[idx];
    const float x_sq = x * x, t = tanhf(kBeta * (x + kKappa * (x_sq * x)));
    const float left = 0.5f * x, right = 1.f + t;
    const float dgelu = 0.5f * right + left * (1.f - t * t) * kBeta * (1.f + 3.f * kKappa * x_sq);
    dgu[n * 2 * F + f] = d * u * dgelu;
    dgu[n * 2 * F + F + f] = d * (left * right);
  }
}

}  // namespace

void geglu_fwd(const float* gu, float* h, int64_t N, int64_t F, cudaStream_t s) {
  if (N * F <= 0) return;
  geglu_fwd_kernel<float, float><<<dev::blocks_for(N * F, 256), 256, 0, s>>>(gu, h, N, F);
  TEMPER_CUDA_LAUNCHED("geglu_fwd");
}
void geglu_fwd(const uint16_t* gu, uint16_t* h, int64_t N, int64_t F, cudaStream_t s) {
  if (N * F <= 0) return;
  geglu_fwd_kernel<__nv_bfloat16, __nv_bfloat16>
      <<<dev::blocks_for(N * F, 256), 256, 0, s>>>(dev::bf(gu), dev::bf(h), N, F);
  TEMPER_CUDA_LAUNCHED("geglu_fwd_bf16");
}
void geglu_fwd(const float* gu, uint16_t* h, int64_t N, int64_t F, cudaStream_t s) {
  if (N * F <= 0) return;
  geglu_fwd_kernel<float, __nv_bfloat16><<<dev::blocks_for(N * F, 256), 256, 0, s>>>(gu, dev::bf(h), N, F);
  TEMPER_CUDA_LAUNCHED("geglu_fwd_f32_bf16");
}
void geglu_bwd(const float* gu, const float* dh, float* dgu, int64_t N, int64_t F, cudaStream_t s) {
  if (N * F <= 0) return;
  geglu_bwd_kernel<<<dev::blocks_for(N * F, 256), 256, 0, s>>>(gu, dh, dgu, N, F);
  TEMPER_CUDA_LAUNCHED("geglu_bwd");
}

}  // namespace temper::cuda
