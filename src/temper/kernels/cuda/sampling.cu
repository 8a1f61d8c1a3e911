// Device sampling by inverse CDF in vocabulary order; see sampling.h. One block per row: each
// thread owns a contiguous slice of the vocabulary, slice sums (double) are scanned in thread order,
// and the thread whose slice holds u * Z walks it. Non-finite logits are skipped, as on the CPU.
#include "temper/core/error.h"
#include "temper/kernels/cuda/common.cuh"
#include "temper/kernels/cuda/sampling.h"

namespace temper::cuda {
namespace {

constexpr int kThreads = 256;

__global__ void sample_rows_kernel(SampleRowsArgs a) {
  __shared__ float redf[32];
  __shared__ double prefix[kThreads + 1];
  __shared__ int pick_s;
  const int64_t r = blockIdx.x;
  const float* z = a.logits + r * a.ld;
  const int64_t V = a.V;
  const int tid = threadIdx.x;
  // maximum (first index of it, for greedy)
  float mx = -INFINITY;
  for (int64_t v = tid; v < V; v += blockDim.x)
    if (isfinite(z[v])) mx = fmaxf(mx, z[v]);
  mx = dev::block_max(mx, redf);
  // policy statistics at temperature 1
  float se = 0.f, sz = 0.f;  // sz: sum e (z - max)
  for (int64_t v = tid; v < V; v += blockDim.x)
    if (isfinite(z[v])) {
      const float d = z[v] - mx, e = __expf(d);
      se += e;
      sz += e * d;
    }
  se = dev::block_sum(se, redf);
  sz = dev::block_sum(sz, redf);
  const float lse = mx + logf(se), ent = logf(se) - sz / se;
  const float T = a.temperature[r];
  const int32_t forced = a.forced ? a.forced[r] : -1;
  if (forced >= 0) {  // no draw: the forced token with the policy's statistics
    if (tid == 0) {
      a.token[r] = forced;
      a.policy_logprob[r] = z[forced] - lse;
      a.sample_logprob[r] = z[forced] - lse;
      a.entropy[r] = ent;
    }
    return;
  }
  if (!(mx > -INFINITY)) {  // no finite logit: nothing to draw (the CPU sampler throws); flag the row
    if (tid == 0) {
      a.token[r] = -1;
      a.sample_logprob[r] = a.policy_logprob[r] = a.entropy[r] = NAN;
    }
    return;
  }
  if (tid == 0) pick_s = -1;
  __syncthreads();
  const int64_t per = (V + blockDim.x - 1) / blockDim.x, begin = min(V, tid * per), end = min(V, begin + per);
  if (T <= 0.f) {
    for (int64_t v = begin; v < end; ++v)
      if (z[v] == mx) {
        atomicMin(reinterpret_cast<unsigned*>(&pick_s), static_cast<unsigned>(v));  // -1 is UINT_MAX
        break;
      }
    __syncthreads();
    if (tid == 0) {
      const int p = pick_s;
      a.token[r] = p;
      a.sample_logprob[r] = 0.f;
      a.policy_logprob[r] = z[p] - lse;
      a.entropy[r] = ent;
    }
    return;
  }
  const double inv_t = static_cast<double>(1.0f / T);  // the CPU's float reciprocal, then double
  double part = 0;
  for (int64_t v = begin; v < end; ++v)
    if (isfinite(z[v])) part += exp(static_cast<double>(z[v] - mx) * inv_t);
  prefix[tid + 1] = part;
  __syncthreads();
  if (tid == 0) {
    prefix[0] = 0;
    for (int t = 1; t <= static_cast<int>(blockDim.x); ++t) prefix[t] += prefix[t - 1];
  }
  __syncthreads();
  const double Z = prefix[blockDim.x], target = a.u[r] * Z;
  if (target >= prefix[tid] && target < prefix[tid + 1]) {
    double acc = prefix[tid];
    int64_t pick = -1;
    for (int64_t v = begin; v < end; ++v) {
      if (!isfinite(z[v])) continue;
      acc += exp(static_cast<double>(z[v] - mx) * inv_t);
      pick = v;
      if (target < acc) break;
    }
    if (pick >= 0) atomicMin(reinterpret_cast<unsigned*>(&pick_s), static_cast<unsigned>(pick));
  }
  __syncthreads();
  if (tid == 0) {
    int p = pick_s;
    if (p < 0)  // rounding at the very end of the distribution: the last finite token, as the CPU
      for (int64_t v = V - 1; v >= 0; --v)
        if (isfinite(z[v])) {
          p = static_cast<int>(v);
          break;
        }
    a.token[r] = p;
    a.sample_logprob[r] = static_cast<float>(static_cast<double>(z[p] - mx) * inv_t - log(Z));
    a.policy_logprob[r] = z[p] - lse;
    a.entropy[r] = ent;
  }
}

}  // namespace

void sample_rows(const SampleRowsArgs& a, cudaStream_t s) {
  TEMPER_CHECK(a.V > 0 && a.ld >= a.V) << "CUDA sampling: V " << a.V << ", row stride " << a.ld;
  if (a.B == 0) return;
  sample_rows_kernel<<<static_cast<unsigned>(a.B), kThreads, 0, s>>>(a);
  TEMPER_CUDA_LAUNCHED("sample_rows");
}

}  // namespace temper::cuda
