// AdamW on fp32 master weights (torch.optim.AdamW's update, as kernels/adamw.h), optionally writing
// the bf16 compute copy in the same pass and scaling the gradient on the fly (clipping); gradient sum
// of squares in fixed blocks, then the blocks in a fixed order (double), so clipping sees the same
// norm for every launch of the same shape.
#include "temper/kernels/cuda/common.cuh"
#include "temper/kernels/cuda/ops.h"

namespace temper::cuda {
namespace {

constexpr int kNormThreads = 256;
constexpr int64_t kNormBlock = 16384;  // elements per partial sum

__global__ void adamw_kernel(float* p, const float* g, float* m, float* v, int64_t n, float lr, float b1, float b2,
                             float eps, float wd, float bc1, float sqrt_bc2, __nv_bfloat16* p_bf16, float gscale) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    float pi = p[i] * (1.f - lr * wd);
    const float gi = gscale == 1.f ? g[i] : g[i] * gscale;  // clipping folded in: the same product a scaling pass makes
    const float mi = b1 * m[i] + (1.f - b1) * gi;
    const float vi = b2 * v[i] + (1.f - b2) * gi * gi;
    pi -= lr / bc1 * mi / (sqrtf(vi) / sqrt_bc2 + eps);
    p[i] = pi;
    m[i] = mi;
    v[i] = vi;
    if (p_bf16) p_bf16[i] = __float2bfloat16_rn(pi);
  }
}

__global__ void sumsq_partial_kernel(const float* g, int64_t n, double* partial) {
  __shared__ double red[32];
  const int64_t begin = blockIdx.x * kNormBlock, end = min(n, begin + kNormBlock);
  double acc = 0;
  for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) acc += static_cast<double>(g[i]) * g[i];
  acc = dev::block_sum(acc, red);
  if (threadIdx.x == 0) partial[blockIdx.x] = acc;
}

// One block: thread t adds its contiguous run of partials in order, then the block's fixed-order tree
// (a few microseconds for 30,000 partials, where one thread took 2 ms).
__global__ void sum_in_order_kernel(const double* partial, int64_t count, double* out) {
  __shared__ double red[32];
  const int64_t per = (count + blockDim.x - 1) / blockDim.x, begin = threadIdx.x * per, end = min(count, begin + per);
  double acc = 0;
  for (int64_t i = begin; i < end; ++i) acc += partial[i];
  acc = dev::block_sum(acc, red);
  if (threadIdx.x == 0) *out = acc;
}


}  // namespace

void adamw_step(float* p, const float* g, float* m, float* v, int64_t n, float lr, float beta1, float beta2, float eps,
                float weight_decay, int64_t step, uint16_t* p_bf16, cudaStream_t s, float grad_scale) {
  if (n <= 0) return;
  const float bc1 = 1.f - std::pow(beta1, static_cast<float>(step));
  const float bc2 = 1.f - std::pow(beta2, static_cast<float>(step));
  adamw_kernel<<<dev::blocks_for(n, 256), 256, 0, s>>>(p, g, m, v, n, lr, beta1, beta2, eps, weight_decay, bc1,
                                                       std::sqrt(bc2), p_bf16 ? dev::bf(p_bf16) : nullptr, grad_scale);
  TEMPER_CUDA_LAUNCHED("adamw_step");
}

int64_t grad_norm_workspace(int64_t n) { return (n + kNormBlock - 1) / kNormBlock; }

void grad_sumsq(const float* g, int64_t n, double* workspace, double* out, cudaStream_t s) {
  const int64_t blocks = grad_norm_workspace(n);
  if (blocks == 0) {
    TEMPER_CUDA_CHECK(cudaMemsetAsync(out, 0, sizeof(double), s));
    return;
  }
  sumsq_partial_kernel<<<static_cast<unsigned>(blocks), kNormThreads, 0, s>>>(g, n, workspace);
  TEMPER_CUDA_LAUNCHED("grad_sumsq_partial");
  sum_in_order_kernel<<<1, 1024, 0, s>>>(workspace, blocks, out);
  TEMPER_CUDA_LAUNCHED("grad_sumsq_total");
}

}  // namespace temper::cuda
