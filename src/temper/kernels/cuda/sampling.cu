// Device sampling by inverse CDF in vocabulary order; see sampling.h. The vocabulary of each row is
// cut into chunks of kChunk entries, one block each, so a single row (decode at batch 1) spreads
// over many multiprocessors instead of one:
//   1. chunk_max:   each chunk's largest finite logit and the first index holding it;
//   2. chunk_sums:  with the row's maximum, each chunk's softmax sums at temperature 1 (float, for
//                   the policy's log-prob and entropy) and its tempered mass sum exp((z - max) / T)
//                   (double, for the draw);
//   3. choose:      one block per row adds the chunks' sums in chunk order, finds the chunk whose
//                   cumulative mass passes u * Z, and scans that chunk's entries in order (a block
//                   scan in double) to the first whose cumulative mass passes it.
// Non-finite logits are skipped, as on the CPU. Every sum has a fixed order: deterministic.
#include "temper/core/error.h"
#include "temper/kernels/cuda/common.cuh"
#include "temper/kernels/cuda/sampling.h"

namespace temper::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kChunk = 2048;  // vocabulary entries per block (8 per thread)

struct ChunkStats {  // per (row, chunk)
  float max;         // -inf when the chunk has no finite logit
  int32_t argmax;    // first index of max (-1 when none)
  float se, sz;      // sum e, sum e (z - row max) with e = exp(z - row max)
  double mass;       // sum exp((z - row max) / T) in double (0 for greedy / forced rows)
};

int64_t chunks_of(int64_t V) {
  return (V + kChunk - 1) / kChunk;
}

__global__ void chunk_max_kernel(SampleRowsArgs a, ChunkStats* ws, int64_t nc) {
  __shared__ float mx_s[kThreads / 32];
  __shared__ int32_t ix_s[kThreads / 32];
  const int64_t r = blockIdx.y, c = blockIdx.x;
  const float* z = a.logits + r * a.ld;
  const int64_t begin = c * kChunk, end = min(a.V, begin + kChunk);
  float mx = -INFINITY;
  int32_t ix = -1;
  for (int64_t v = begin + threadIdx.x; v < end; v += kThreads) {  // increasing v: the first of equals stays
    const float x = z[v];
    if (isfinite(x) && x > mx) {
      mx = x;
      ix = static_cast<int32_t>(v);
    }
  }
  for (int o = 16; o > 0; o >>= 1) {  // (max, first index) over the warp
    const float m2 = __shfl_xor_sync(0xffffffffu, mx, o);
    const int32_t i2 = __shfl_xor_sync(0xffffffffu, ix, o);
    if (m2 > mx || (m2 == mx && i2 >= 0 && (ix < 0 || i2 < ix))) {
      mx = m2;
      ix = i2;
    }
  }
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) {
    mx_s[warp] = mx;
    ix_s[warp] = ix;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < kThreads / 32; ++w)
      if (mx_s[w] > mx_s[0] || (mx_s[w] == mx_s[0] && ix_s[w] >= 0 && (ix_s[0] < 0 || ix_s[w] < ix_s[0]))) {
        mx_s[0] = mx_s[w];
        ix_s[0] = ix_s[w];
      }
    ws[r * nc + c].max = mx_s[0];
    ws[r * nc + c].argmax = ix_s[0];
  }
}

__device__ float row_max(const ChunkStats* row, int64_t nc) {
  float mx = -INFINITY;
  for (int64_t c = 0; c < nc; ++c) mx = fmaxf(mx, row[c].max);
  return mx;
}

__global__ void chunk_sums_kernel(SampleRowsArgs a, ChunkStats* ws, int64_t nc) {
  __shared__ float redf[32];
  __shared__ double redd[32];
  const int64_t r = blockIdx.y, c = blockIdx.x;
  ChunkStats* row = ws + r * nc;
  const float mx = row_max(row, nc);
  const float* z = a.logits + r * a.ld;
  const int64_t begin = c * kChunk, end = min(a.V, begin + kChunk);
  const float T = a.temperature[r];
  const bool draw = !(a.forced && a.forced[r] >= 0) && T > 0.f && mx > -INFINITY;
  const double inv_t = draw ? static_cast<double>(1.0f / T) : 0.0;  // the CPU's float reciprocal, then double
  float se = 0.f, sz = 0.f;
  double mass = 0.0;
  for (int64_t v = begin + threadIdx.x; v < end; v += kThreads) {
    const float x = z[v];
    if (!isfinite(x)) continue;
    const float d = x - mx, e = __expf(d);
    se += e;
    sz += e * d;
    if (draw) mass += exp(static_cast<double>(d) * inv_t);
  }
  se = dev::block_sum(se, redf);
  sz = dev::block_sum(sz, redf);
  mass = dev::block_sum(mass, redd);
  if (threadIdx.x == 0) {
    row[c].se = se;
    row[c].sz = sz;
    row[c].mass = mass;
  }
}

__global__ void choose_kernel(SampleRowsArgs a, const ChunkStats* ws, int64_t nc) {
  __shared__ double warp_tot[kThreads / 32];
  __shared__ int32_t pick_s;
  __shared__ double base_s, Z_s;
  __shared__ float lse_s;
  __shared__ int64_t chunk_s;
  const int64_t r = blockIdx.x;
  const ChunkStats* row = ws + r * nc;
  const float* z = a.logits + r * a.ld;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const float mx = row_max(row, nc);
  if (tid == 0) {
    float se = 0.f, sz = 0.f;
    double Z = 0.0, target = 0.0, base = 0.0;
    for (int64_t c = 0; c < nc; ++c) {
      se += row[c].se;
      sz += row[c].sz;
      Z += row[c].mass;
    }
    const float lse = mx + logf(se), ent = logf(se) - sz / se;
    const float T = a.temperature[r];
    const int32_t forced = a.forced ? a.forced[r] : -1;
    int64_t chunk = -1;
    int32_t pick = -2;  // -2: the block scan below decides
    if (forced >= 0) {  // no draw: the forced token with the policy's statistics
      a.token[r] = forced;
      a.policy_logprob[r] = z[forced] - lse;
      a.sample_logprob[r] = z[forced] - lse;
      a.entropy[r] = ent;
      pick = -3;
    } else if (!(mx > -INFINITY)) {  // no finite logit: nothing to draw (the CPU sampler throws); flag the row
      a.token[r] = -1;
      a.sample_logprob[r] = a.policy_logprob[r] = a.entropy[r] = NAN;
      pick = -3;
    } else if (T <= 0.f) {  // greedy: the first index of the maximum
      for (int64_t c = 0; c < nc; ++c)
        if (row[c].max == mx) {
          pick = row[c].argmax;
          break;
        }
      a.token[r] = pick;
      a.sample_logprob[r] = 0.f;
      a.policy_logprob[r] = z[pick] - lse;
      a.entropy[r] = ent;
      pick = -3;
    } else {
      target = a.u[r] * Z;
      double acc = 0.0;
      for (int64_t c = 0; c < nc; ++c) {
        if (target < acc + row[c].mass) {
          chunk = c;
          base = acc;
          break;
        }
        acc += row[c].mass;
      }
      if (chunk < 0) pick = -1;  // rounding at the very end of the distribution: the last finite token below
      a.entropy[r] = ent;
    }
    lse_s = lse;
    pick_s = pick;
    chunk_s = chunk;
    base_s = base;
    Z_s = Z;
  }
  __syncthreads();
  const int32_t mode = pick_s;  // -3 done, -2 scan chunk_s, -1 the last finite token
  if (mode == -3) return;
  __syncthreads();  // every thread has read mode before pick_s changes
  const double Z = Z_s, target = a.u[r] * Z;
  const double inv_t = static_cast<double>(1.0f / a.temperature[r]);
  if (mode == -2) {  // scan chunk_s in vocabulary order for the first entry whose cumulative mass passes target
    const int64_t begin = chunk_s * kChunk, end = min(a.V, begin + kChunk);
    double base = base_s;
    int32_t found = -1;
    for (int64_t t0 = begin; t0 < end; t0 += kThreads) {
      const int64_t v = t0 + tid;
      const float x = v < end ? z[v] : -INFINITY;
      const double e = isfinite(x) ? exp(static_cast<double>(x - mx) * inv_t) : 0.0;
      double inc = e;  // inclusive scan over the warp, then over the warps
      for (int o = 1; o < 32; o <<= 1) {
        const double y = __shfl_up_sync(0xffffffffu, inc, o);
        if (lane >= o) inc += y;
      }
      if (lane == 31) warp_tot[warp] = inc;
      __syncthreads();
      double before = base;
      for (int w = 0; w < warp; ++w) before += warp_tot[w];
      double tile = 0.0;
      for (int w = 0; w < kThreads / 32; ++w) tile += warp_tot[w];
      const bool passes = isfinite(x) && target < before + inc;
      const unsigned any = __syncthreads_or(passes);
      if (any) {
        if (passes) atomicMin(reinterpret_cast<unsigned*>(&pick_s), static_cast<unsigned>(v));  // -2 is large
        __syncthreads();
        found = pick_s;
        break;
      }
      base += tile;
      __syncthreads();  // warp_tot is rewritten by the next tile
    }
    if (found < 0 && tid == 0) {  // the scan's rounding fell short of target: the chunk's last finite entry
      for (int64_t v = end - 1; v >= begin; --v)
        if (isfinite(z[v])) {
          pick_s = static_cast<int32_t>(v);
          break;
        }
    }
  } else if (tid == 0) {  // mode == -1
    for (int64_t v = a.V - 1; v >= 0; --v)
      if (isfinite(z[v])) {
        pick_s = static_cast<int32_t>(v);
        break;
      }
  }
  __syncthreads();
  if (tid == 0) {
    const int32_t p = pick_s;
    const float lse = lse_s;
    a.token[r] = p;
    a.sample_logprob[r] = static_cast<float>(static_cast<double>(z[p] - mx) * inv_t - log(Z));
    a.policy_logprob[r] = z[p] - lse;
  }
}

}  // namespace

size_t sample_rows_workspace_bytes(int64_t B, int64_t V) {
  return static_cast<size_t>(B * chunks_of(V)) * sizeof(ChunkStats);
}

void sample_rows(const SampleRowsArgs& a, cudaStream_t s) {
  TEMPER_CHECK(a.V > 0 && a.ld >= a.V) << "CUDA sampling: V " << a.V << ", row stride " << a.ld;
  if (a.B == 0) return;
  TEMPER_CHECK(a.workspace && a.workspace_bytes >= sample_rows_workspace_bytes(a.B, a.V))
      << "CUDA sampling: workspace of " << a.workspace_bytes << " bytes, " << a.B << " rows of " << a.V << " need "
      << sample_rows_workspace_bytes(a.B, a.V);
  TEMPER_CHECK(a.B <= 65535) << "CUDA sampling: " << a.B << " rows in one call (at most 65535)";
  const int64_t nc = chunks_of(a.V);
  auto* ws = static_cast<ChunkStats*>(a.workspace);
  const dim3 grid(static_cast<unsigned>(nc), static_cast<unsigned>(a.B));
  chunk_max_kernel<<<grid, kThreads, 0, s>>>(a, ws, nc);
  TEMPER_CUDA_LAUNCHED("sample_rows_max");
  chunk_sums_kernel<<<grid, kThreads, 0, s>>>(a, ws, nc);
  TEMPER_CUDA_LAUNCHED("sample_rows_sums");
  choose_kernel<<<static_cast<unsigned>(a.B), kThreads, 0, s>>>(a, ws, nc);
  TEMPER_CUDA_LAUNCHED("sample_rows_choose");
}

}  // namespace temper::cuda
