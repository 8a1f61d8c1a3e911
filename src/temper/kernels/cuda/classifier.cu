// Fused classifier on the device; see classifier.h. Row statistics as kernels::logit_row_stats:
// lse = max + log(sum exp(z - max)), logprob = z_t - lse, entropy = lse - sum p z.
// Gradient on the logits: g_lp (1[v = t] - p_v) + g_ent (-p_v (log p_v + H)). With soft-capping the
// logits are capped in place first (tanh(z / cap) * cap) and the gradient is chained by 1 - (zc / cap)^2.
#include <cmath>

#include "temper/core/error.h"
#include "temper/kernels/cuda/classifier.h"
#include "temper/kernels/cuda/common.cuh"

namespace temper::cuda {
namespace {

constexpr int kThreads = 512;

// HF Gemma2's order: divide, tanh, multiply (IEEE division and tanhf: no fast-math intrinsics).
__device__ inline float softcap_f(float z, float cap) {
  return tanhf(z / cap) * cap;
}

__global__ void softcap_kernel(float* z, int64_t n, float cap) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x)
    z[i] = softcap_f(z[i], cap);
}

__global__ void row_stats_kernel(const float* z, int64_t V, const int32_t* targets, float* logprob, float* entropy,
                                 float* lse_out) {
  __shared__ float red[32];
  const int64_t r = blockIdx.x;
  const float* zr = z + r * V;
  float mx = -INFINITY;
  for (int64_t v = threadIdx.x; v < V; v += blockDim.x) mx = fmaxf(mx, zr[v]);
  mx = dev::block_max(mx, red);
  float se = 0.f, sz = 0.f;  // sz: sum e (z - max), so confident rows lose no digits to cancellation
  for (int64_t v = threadIdx.x; v < V; v += blockDim.x) {
    const float d = zr[v] - mx, e = __expf(d);
    se += e;
    sz += e * d;
  }
  se = dev::block_sum(se, red);
  sz = dev::block_sum(sz, red);
  if (threadIdx.x == 0) {
    const float lse = mx + logf(se);
    const int32_t t = targets ? targets[r] : -1;
    logprob[r] = t >= 0 ? zr[t] - lse : 0.f;
    entropy[r] = logf(se) - sz / se;
    lse_out[r] = lse;
  }
}

__global__ void logits_grad_kernel(float* z, int64_t V, const int32_t* targets, const float* lse, const float* entropy,
                                   const float* coefs, float cap) {
  const int64_t r = blockIdx.x;
  float* zr = z + r * V;
  const int32_t t = targets ? targets[r] : -1;
  const float L = lse[r], H = entropy[r], g_ent = coefs[2 * r + 1];
  const float g_lp = t >= 0 ? coefs[2 * r] : 0.f;  // no target: no log-prob term (as the CPU)
  for (int64_t v = threadIdx.x; v < V; v += blockDim.x) {
    const float lp = zr[v] - L, p = __expf(lp);
    const float dz = g_lp * ((v == t ? 1.f : 0.f) - p) - g_ent * p * (lp + H);
    if (cap > 0.f) {
      const float tc = zr[v] / cap;
      zr[v] = dz * (1.f - tc * tc);
    } else {
      zr[v] = dz;
    }
  }
}

}  // namespace

void softcap_rows(float* z, int64_t n, float softcap, cudaStream_t s) {
  if (softcap <= 0.f || n <= 0) return;
  softcap_kernel<<<dev::blocks_for(n, 256), 256, 0, s>>>(z, n, softcap);
  TEMPER_CUDA_LAUNCHED("softcap_rows");
}

ClassifierWorkspace::ClassifierWorkspace(int64_t chunk_rows, int64_t V)
    : chunk_(chunk_rows), V_(V), logits_(static_cast<size_t>(chunk_rows * V)), lse_(static_cast<size_t>(chunk_rows)),
      coefs_(static_cast<size_t>(2 * chunk_rows)) {
  TEMPER_CHECK(chunk_rows > 0 && V > 0) << "classifier workspace: chunk " << chunk_rows << " x V " << V;
  TEMPER_CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&host_), sizeof(float) * 4 * chunk_rows));
}

ClassifierWorkspace::~ClassifierWorkspace() {
  if (host_) cudaFreeHost(host_);
}

void classifier_fused(Blas& blas, ClassifierWorkspace& ws, const ClassifierDeviceArgs& a) {
  TEMPER_CHECK(a.V == ws.V()) << "CUDA classifier: workspace for V " << ws.V() << ", called with V " << a.V;
  TEMPER_CHECK(!a.loss || (a.dh && a.dw)) << "CUDA classifier: a loss needs dh and dw";
  TEMPER_CHECK(a.softcap >= 0.f && std::isfinite(a.softcap))
      << "CUDA classifier: softcap must be finite and >= 0 (0 = off), got " << a.softcap;
  cudaStream_t st = blas.stream();
  const bool bf16 = a.h_bf16 && a.w_bf16;
  for (int64_t r0 = 0; r0 < a.N; r0 += ws.chunk_rows()) {
    const int64_t rows = std::min(ws.chunk_rows(), a.N - r0);
    blas.gemm(gemm_args(false, true, rows, a.V, a.C,  // logits[rows, V] = h W^T
                        bf16 ? static_cast<const void*>(a.h_bf16 + r0 * a.C) : static_cast<const void*>(a.h + r0 * a.C),
                        a.C, bf16 ? static_cast<const void*>(a.w_bf16) : static_cast<const void*>(a.w), a.C, 0.f,
                        ws.logits(), a.V, bf16 ? GemmType::bf16 : GemmType::f32));
    if (a.softcap > 0.f) softcap_rows(ws.logits(), rows * a.V, a.softcap, st);
    const int32_t* tg = a.targets ? a.targets + r0 : nullptr;
    row_stats_kernel<<<static_cast<unsigned>(rows), kThreads, 0, st>>>(ws.logits(), a.V, tg, a.logprob + r0,
                                                                       a.entropy + r0, ws.lse());
    TEMPER_CUDA_LAUNCHED("classifier_row_stats");
    if (!a.loss) continue;
    float* host = ws.host();
    TEMPER_CUDA_CHECK(cudaMemcpyAsync(host, a.logprob + r0, sizeof(float) * rows, cudaMemcpyDeviceToHost, st));
    TEMPER_CUDA_CHECK(cudaMemcpyAsync(host + ws.chunk_rows(), a.entropy + r0, sizeof(float) * rows,
                                      cudaMemcpyDeviceToHost, st));
    TEMPER_CUDA_CHECK(cudaStreamSynchronize(st));
    float* coefs = host + 2 * ws.chunk_rows();
    for (int64_t i = 0; i < rows; ++i) {
      kernels::SoftTarget soft;
      kernels::ReverseKlTarget rkl;
      const bool has_soft = a.loss->soft_target(r0 + i, &soft) && soft.K > 0;
      const bool has_rkl = a.loss->reverse_kl_target(r0 + i, &rkl) && rkl.logq;
      TEMPER_CHECK(!has_soft && !has_rkl)
          << "the CUDA classifier does not run logit distillation yet (soft or reverse-KL targets): use the CPU";
      a.loss->coefs(r0 + i, host[i], host[ws.chunk_rows() + i], &coefs[2 * i], &coefs[2 * i + 1]);
    }
    TEMPER_CUDA_CHECK(cudaMemcpyAsync(ws.coefs(), coefs, sizeof(float) * 2 * rows, cudaMemcpyHostToDevice, st));
    logits_grad_kernel<<<static_cast<unsigned>(rows), kThreads, 0, st>>>(ws.logits(), a.V, tg, ws.lse(), a.entropy + r0,
                                                                         ws.coefs(), a.softcap);
    TEMPER_CUDA_LAUNCHED("classifier_logits_grad");
    GemmArgs dh = gemm_args(false, false, rows, a.C, a.V, ws.logits(), a.V, a.w, a.C, 0.f, a.dh + r0 * a.C, a.C,
                            GemmType::f32);  // dh[rows, C] = dZ[rows, V] W[V, C]
    dh.allow_tf32 = bf16;
    blas.gemm(dh);
    GemmArgs dw = gemm_args(true, false, a.V, a.C, rows, ws.logits(), a.V, a.h + r0 * a.C, a.C, 1.f, a.dw, a.C,
                            GemmType::f32);  // dW[V, C] += dZ^T h
    dw.allow_tf32 = bf16;
    blas.gemm(dw);
  }
}

}  // namespace temper::cuda
