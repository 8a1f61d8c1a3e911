// The device ops the other decoder families need beyond Llama's block (issue 36): Qwen3's and Gemma-3's per-head
// q/k RMSNorm (kernels/rmsnorm.h's rmsnorm_heads_*), Gemma's (1 + w) norm weights, its embedding scale and
// sandwich norms (an RMSNorm added to the residual), and the embedding gradient's scale and padding_idx rows
// (nn.Embedding(padding_idx): no gradient into that row). Formulas as the CPU model's (model/transformer.cpp);
// weight gradients through the deterministic column pass of ops.h (no atomics).
#include <algorithm>

#include "temper/kernels/cuda/common.cuh"
#include "temper/kernels/cuda/ops.h"

namespace temper::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kWarpsPerBlock = 4;  // per-head kernels: one warp per (row, head)

__global__ void rmsnorm_heads_fwd_kernel(const float* x, const float* w, float* y, float* rstd, int64_t N, int64_t H,
                                         int64_t D, int64_t stride, float eps) {
  const int64_t g = int64_t{blockIdx.x} * kWarpsPerBlock + threadIdx.x / 32;
  if (g >= N * H) return;
  const int lane = threadIdx.x & 31;
  const int64_t n = g / H, h = g % H;
  const float* xr = x + n * stride + h * D;
  float* yr = y + n * stride + h * D;
  float ss = 0.f;
  for (int64_t d = lane; d < D; d += 32) ss += xr[d] * xr[d];
  ss = dev::warp_sum(ss);
  const float r = rsqrtf(ss / static_cast<float>(D) + eps);
  if (lane == 0) rstd[g] = r;
  for (int64_t d = lane; d < D; d += 32) yr[d] = xr[d] * r * w[d];  // each lane its own d: in place is safe
}

// dx = r * w * dy - x * r^3 / D * sum_d (w_d dy_d x_d) per (row, head); dx may alias dy (each lane reads its own d).
__global__ void rmsnorm_heads_bwd_dx_kernel(const float* dy, const float* x, const float* w, const float* rstd,
                                            float* dx, int64_t N, int64_t H, int64_t D, int64_t stride) {
  const int64_t g = int64_t{blockIdx.x} * kWarpsPerBlock + threadIdx.x / 32;
  if (g >= N * H) return;
  const int lane = threadIdx.x & 31;
  const int64_t base = (g / H) * stride + (g % H) * D;
  const float r = rstd[g];
  float dot = 0.f;
  for (int64_t d = lane; d < D; d += 32) dot += w[d] * dy[base + d] * x[base + d];
  dot = dev::warp_sum(dot);
  const float k = dot * r * r * r / static_cast<float>(D);
  for (int64_t d = lane; d < D; d += 32) dx[base + d] = r * w[d] * dy[base + d] - x[base + d] * k;
}

// dw[d] partials: one per (chunk of rows, d), every head of the chunk's rows in order.
__global__ void rmsnorm_heads_dw_partial_kernel(const float* dy, const float* x, const float* rstd, float* partial,
                                                int64_t N, int64_t H, int64_t D, int64_t stride) {
  const int64_t d = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (d >= D) return;
  const int64_t n0 = int64_t{blockIdx.y} * kColumnChunk, n1 = min(N, n0 + kColumnChunk);
  float acc = 0.f;
  for (int64_t n = n0; n < n1; ++n)
    for (int64_t h = 0; h < H; ++h) {
      const int64_t i = n * stride + h * D + d;
      acc += dy[i] * x[i] * rstd[n * H + h];
    }
  partial[int64_t{blockIdx.y} * D + d] = acc;
}

// y = res + x * rstd * w (rstd of x saved): the sandwich norm of a block's output added to the residual stream.
__global__ void rmsnorm_residual_fwd_kernel(const float* x, const float* w, const float* res, float* y, float* rstd,
                                            int64_t C, float eps) {
  __shared__ float red[32];
  const int64_t row = blockIdx.x;
  const float* xr = x + row * C;
  float ss = 0.f;
  for (int64_t c = threadIdx.x; c < C; c += blockDim.x) ss += xr[c] * xr[c];
  ss = dev::block_sum(ss, red);
  const float r = rsqrtf(ss / static_cast<float>(C) + eps);
  if (threadIdx.x == 0) rstd[row] = r;
  for (int64_t c = threadIdx.x; c < C; c += blockDim.x) y[row * C + c] = res[row * C + c] + xr[c] * r * w[c];
}

__global__ void add_scalar_kernel(const float* x, float a, float* y, int64_t n) {
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x)
    y[i] = x[i] + a;
}

__global__ void scale_kernel(float* x, float a, int64_t n) {
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x)
    x[i] *= a;
}

__global__ void embedding_grad_prep_kernel(float* dx, const int32_t* ids, int64_t N, int64_t C, float scale,
                                           int32_t pad_id) {
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < N * C; i += int64_t{gridDim.x} * blockDim.x)
    dx[i] = ids[i / C] == pad_id ? 0.f : dx[i] * scale;
}

unsigned grid_for(int64_t n) {
  return std::min<unsigned>(dev::blocks_for(n, kThreads), 65535u);
}

}  // namespace

void rmsnorm_heads_fwd(const float* x, const float* w, float* y, float* rstd, int64_t N, int64_t H, int64_t D,
                       int64_t stride, float eps, cudaStream_t s) {
  if (N <= 0 || H <= 0) return;
  const unsigned blocks = static_cast<unsigned>((N * H + kWarpsPerBlock - 1) / kWarpsPerBlock);
  rmsnorm_heads_fwd_kernel<<<blocks, 32 * kWarpsPerBlock, 0, s>>>(x, w, y, rstd, N, H, D, stride, eps);
  TEMPER_CUDA_LAUNCHED("rmsnorm_heads_fwd");
}

void rmsnorm_heads_bwd(const float* dy, const float* x, const float* w, const float* rstd, float* dx, float* dw,
                       int64_t N, int64_t H, int64_t D, int64_t stride, float* workspace, cudaStream_t s) {
  if (N <= 0 || H <= 0) return;
  const int64_t chunks = (N + kColumnChunk - 1) / kColumnChunk;  // dw first: dx may overwrite dy
  rmsnorm_heads_dw_partial_kernel<<<dim3(dev::blocks_for(D, 128), static_cast<unsigned>(chunks)), 128, 0, s>>>(
      dy, x, rstd, workspace, N, H, D, stride);
  TEMPER_CUDA_LAUNCHED("rmsnorm_heads_dw_partial");
  add_partials(workspace, chunks, D, dw, s);
  const unsigned blocks = static_cast<unsigned>((N * H + kWarpsPerBlock - 1) / kWarpsPerBlock);
  rmsnorm_heads_bwd_dx_kernel<<<blocks, 32 * kWarpsPerBlock, 0, s>>>(dy, x, w, rstd, dx, N, H, D, stride);
  TEMPER_CUDA_LAUNCHED("rmsnorm_heads_bwd_dx");
}

void rmsnorm_residual_fwd(const float* x, const float* w, const float* res, float* y, float* rstd, int64_t N, int64_t C,
                          float eps, cudaStream_t s) {
  if (N <= 0) return;
  rmsnorm_residual_fwd_kernel<<<static_cast<unsigned>(N), kThreads, 0, s>>>(x, w, res, y, rstd, C, eps);
  TEMPER_CUDA_LAUNCHED("rmsnorm_residual_fwd");
}

void add_scalar(const float* x, float a, float* y, int64_t n, cudaStream_t s) {
  if (n <= 0) return;
  add_scalar_kernel<<<grid_for(n), kThreads, 0, s>>>(x, a, y, n);
  TEMPER_CUDA_LAUNCHED("add_scalar");
}

void scale(float* x, float a, int64_t n, cudaStream_t s) {
  if (n <= 0) return;
  scale_kernel<<<grid_for(n), kThreads, 0, s>>>(x, a, n);
  TEMPER_CUDA_LAUNCHED("scale");
}

void embedding_grad_prep(float* dx, const int32_t* ids, int64_t N, int64_t C, float scale, int32_t pad_id,
                         cudaStream_t s) {
  if (N <= 0) return;
  embedding_grad_prep_kernel<<<grid_for(N * C), kThreads, 0, s>>>(dx, ids, N, C, scale, pad_id);
  TEMPER_CUDA_LAUNCHED("embedding_grad_prep");
}

}  // namespace temper::cuda
