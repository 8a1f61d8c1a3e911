// RMSNorm forward/backward on the device: one block per row; the weight gradient in a separate
// column pass (thread per channel, rows in order), so it is deterministic without atomics.
// Formulas as kernels/rmsnorm.h (HF LlamaRMSNorm).
#include "temper/kernels/cuda/common.cuh"
#include "temper/kernels/cuda/ops.h"

namespace temper::cuda {
namespace {

constexpr int kThreads = 256;

template <class Tin, class Tout>
__global__ void rmsnorm_fwd_kernel(const Tin* x, const float* w, Tout* y, float* rstd, int64_t C, float eps) {
  __shared__ float red[32];
  const int64_t row = blockIdx.x;
  const Tin* xr = x + row * C;
  Tout* yr = y + row * C;
  float ss = 0.f;
  for (int64_t c = threadIdx.x; c < C; c += blockDim.x) {
    float v = dev::ld(xr, c);
    ss += v * v;
  }
  ss = dev::block_sum(ss, red);
  const float r = rsqrtf(ss / static_cast<float>(C) + eps);
  if (threadIdx.x == 0) rstd[row] = r;
  for (int64_t c = threadIdx.x; c < C; c += blockDim.x) dev::st(yr, c, dev::ld(xr, c) * r * w[c]);
}

// dx = r * w * dy - x * r^3 / C * sum_j (w_j dy_j x_j)
__global__ void rmsnorm_bwd_dx_kernel(const float* dy, const float* x, const float* w, const float* rstd, float* dx,
                                      int64_t C, bool accumulate) {
  __shared__ float red[32];
  const int64_t row = blockIdx.x;
  const float* dyr = dy + row * C;
  const float* xr = x + row * C;
  float* dxr = dx + row * C;
  const float r = rstd[row];
  float dot = 0.f;
  for (int64_t c = threadIdx.x; c < C; c += blockDim.x) dot += w[c] * dyr[c] * xr[c];
  dot = dev::block_sum(dot, red);
  const float k = dot * r * r * r / static_cast<float>(C);
  for (int64_t c = threadIdx.x; c < C; c += blockDim.x) {
    float g = r * w[c] * dyr[c] - xr[c] * k;
    dxr[c] = accumulate ? dxr[c] + g : g;
  }
}

// First pass of dw[c] = sum_n dy x rstd: one partial per (chunk of rows, column); ops.h's add_partials sums them.
__global__ void rmsnorm_bwd_dw_partial_kernel(const float* dy, const float* x, const float* rstd, float* partial,
                                              int64_t N, int64_t C) {
  const int64_t c = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (c >= C) return;
  const int64_t n0 = int64_t{blockIdx.y} * kColumnChunk, n1 = min(N, n0 + kColumnChunk);
  float acc = 0.f;
  for (int64_t n = n0; n < n1; ++n) acc += dy[n * C + c] * x[n * C + c] * rstd[n];
  partial[int64_t{blockIdx.y} * C + c] = acc;
}

}  // namespace

void rmsnorm_fwd(const float* x, const float* w, float* y, float* rstd, int64_t N, int64_t C, float eps,
                 cudaStream_t s) {
  if (N <= 0) return;
  rmsnorm_fwd_kernel<float, float><<<static_cast<unsigned>(N), kThreads, 0, s>>>(x, w, y, rstd, C, eps);
  TEMPER_CUDA_LAUNCHED("rmsnorm_fwd");
}
void rmsnorm_fwd(const uint16_t* x, const float* w, uint16_t* y, float* rstd, int64_t N, int64_t C, float eps,
                 cudaStream_t s) {
  if (N <= 0) return;
  rmsnorm_fwd_kernel<__nv_bfloat16, __nv_bfloat16>
      <<<static_cast<unsigned>(N), kThreads, 0, s>>>(dev::bf(x), w, dev::bf(y), rstd, C, eps);
  TEMPER_CUDA_LAUNCHED("rmsnorm_fwd_bf16");
}
void rmsnorm_fwd(const float* x, const float* w, uint16_t* y, float* rstd, int64_t N, int64_t C, float eps,
                 cudaStream_t s) {
  if (N <= 0) return;
  rmsnorm_fwd_kernel<float, __nv_bfloat16><<<static_cast<unsigned>(N), kThreads, 0, s>>>(x, w, dev::bf(y), rstd, C, eps);
  TEMPER_CUDA_LAUNCHED("rmsnorm_fwd_f32_bf16");
}
void rmsnorm_bwd(const float* dy, const float* x, const float* w, const float* rstd, float* dx, float* dw, int64_t N,
                 int64_t C, bool accumulate_dx, float* workspace, cudaStream_t s) {
  if (N <= 0) return;
  rmsnorm_bwd_dx_kernel<<<static_cast<unsigned>(N), kThreads, 0, s>>>(dy, x, w, rstd, dx, C, accumulate_dx);
  TEMPER_CUDA_LAUNCHED("rmsnorm_bwd_dx");
  const int64_t chunks = (N + kColumnChunk - 1) / kColumnChunk;
  rmsnorm_bwd_dw_partial_kernel<<<dim3(dev::blocks_for(C, 128), static_cast<unsigned>(chunks)), 128, 0, s>>>(
      dy, x, rstd, workspace, N, C);
  TEMPER_CUDA_LAUNCHED("rmsnorm_bwd_dw_partial");
  add_partials(workspace, chunks, C, dw, s);
}

}  // namespace temper::cuda
