// Causal GQA flash attention (training) on the device; see attention.h (paged decode attention:
// paged_attention.cu). Scores are scaled by 1/sqrt(D); the saved lse is in those units, as on the CPU.
#include <cmath>

#include "temper/core/error.h"
#include "temper/kernels/cuda/attention.h"
#include "temper/kernels/cuda/common.cuh"

namespace temper::cuda {
namespace {

constexpr int kWarps = 8;   // query (or key) rows per block
constexpr int kTile = 32;   // K/V (or Q/dO) rows per shared-memory tile
constexpr int kMaxDPerLane = 8;  // D <= 256

// Rows [j0, j0 + kTile) of KV head kvh of batch b into shared memory (zeros past T): K with row
// stride D + 1 (conflict-free column reads), V with row stride v_stride. The whole block calls it.
__device__ void load_kv_tile(const kernels::AttnShape& s, const float* k, const float* v, int64_t b, int64_t kvh,
                             int64_t j0, float* Ks, float* Vs, int64_t v_stride) {
  const int64_t D = s.D;
  for (int64_t e = threadIdx.x; e < kTile * D; e += blockDim.x) {
    const int64_t r = e / D, d = e % D, j = j0 + r;
    const bool in = j < s.T;
    Ks[r * (D + 1) + d] = in ? k[(b * s.T + j) * s.kv_stride + kvh * D + d] : 0.f;
    Vs[r * v_stride + d] = in ? v[(b * s.T + j) * s.kv_stride + kvh * D + d] : 0.f;
  }
}

// ---- forward: warp per query row -------------------------------------------------------------
__global__ void attn_fwd_kernel(kernels::AttnShape s, const float* q, const float* k, const float* v, float* o,
                                float* lse, float scale) {
  extern __shared__ float smem[];
  const int64_t D = s.D, Dp = D + 1;
  float* Ks = smem;                    // [kTile][D + 1]
  float* Vs = Ks + kTile * Dp;         // [kTile][D]
  float* Qs = Vs + kTile * D;          // [kWarps][D]
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t b = blockIdx.z, h = blockIdx.y, kvh = h / (s.H / s.Hkv);
  const int64_t i0 = int64_t{blockIdx.x} * kWarps, i = i0 + warp;
  const bool active = i < s.T;
  if (active)
    for (int64_t d = lane; d < D; d += 32) Qs[warp * D + d] = q[(b * s.T + i) * s.q_stride + h * D + d];
  float acc[kMaxDPerLane];
  for (int c = 0; c < kMaxDPerLane; ++c) acc[c] = 0.f;
  float m = -INFINITY, l = 0.f;
  const int64_t last = min(s.T - 1, i0 + kWarps - 1);
  for (int64_t j0 = 0; j0 <= last; j0 += kTile) {
    __syncthreads();
    load_kv_tile(s, k, v, b, kvh, j0, Ks, Vs, D);
    __syncthreads();
    if (!active || j0 > i) continue;
    const int64_t j = j0 + lane;
    float sc = -INFINITY;
    if (j <= i) {
      float dot = 0.f;
      for (int64_t d = 0; d < D; ++d) dot += Qs[warp * D + d] * Ks[lane * Dp + d];
      sc = dot * scale;
    }
    const float m_new = fmaxf(m, dev::warp_max(sc));
    const float p = (j <= i) ? __expf(sc - m_new) : 0.f;
    const float alpha = __expf(m - m_new);
    l = l * alpha + dev::warp_sum(p);
    for (int c = 0; c < kMaxDPerLane; ++c) acc[c] *= alpha;
    for (int r = 0; r < kTile; ++r) {
      const float pr = __shfl_sync(0xffffffffu, p, r);
      for (int c = 0; c < kMaxDPerLane; ++c) {
        const int64_t d = lane + 32 * c;
        if (d < D) acc[c] += pr * Vs[r * D + d];
      }
    }
    m = m_new;
  }
  if (!active) return;
  const float inv = 1.f / l;
  for (int c = 0; c < kMaxDPerLane; ++c) {
    const int64_t d = lane + 32 * c;
    if (d < D) o[(b * s.T + i) * s.o_stride + h * D + d] = acc[c] * inv;
  }
  if (lane == 0) lse[(b * s.H + h) * s.T + i] = m + logf(l);
}

// ---- backward ---------------------------------------------------------------------------------
__global__ void attn_delta_kernel(kernels::AttnShape s, const float* o, const float* dout, float* delta) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t row = int64_t{blockIdx.x} * kWarps + warp;  // over B * H * T
  if (row >= s.B * s.H * s.T) return;
  const int64_t i = row % s.T, h = (row / s.T) % s.H, b = row / (s.T * s.H);
  float acc = 0.f;
  for (int64_t d = lane; d < s.D; d += 32) {
    const int64_t at = (b * s.T + i) * s.o_stride + h * s.D + d;
    acc += o[at] * dout[at];
  }
  acc = dev::warp_sum(acc);
  if (lane == 0) delta[row] = acc;
}

// dQ_i = scale * sum_j P_ij (dP_ij - delta_i) K_j, warp per query row.
__global__ void attn_dq_kernel(kernels::AttnShape s, const float* q, const float* k, const float* v, const float* lse,
                               const float* delta, const float* dout, float* dq, float scale) {
  extern __shared__ float smem[];
  const int64_t D = s.D, Dp = D + 1;
  float* Ks = smem;              // [kTile][D + 1]
  float* Vs = Ks + kTile * Dp;   // [kTile][D + 1]
  float* Qs = Vs + kTile * Dp;   // [kWarps][D]
  float* dOs = Qs + kWarps * D;  // [kWarps][D]
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t b = blockIdx.z, h = blockIdx.y, kvh = h / (s.H / s.Hkv);
  const int64_t i0 = int64_t{blockIdx.x} * kWarps, i = i0 + warp;
  const bool active = i < s.T;
  float L = 0.f, dl = 0.f;
  if (active) {
    for (int64_t d = lane; d < D; d += 32) {
      Qs[warp * D + d] = q[(b * s.T + i) * s.q_stride + h * D + d];
      dOs[warp * D + d] = dout[(b * s.T + i) * s.o_stride + h * D + d];
    }
    L = lse[(b * s.H + h) * s.T + i];
    dl = delta[(b * s.H + h) * s.T + i];
  }
  float acc[kMaxDPerLane];
  for (int c = 0; c < kMaxDPerLane; ++c) acc[c] = 0.f;
  const int64_t last = min(s.T - 1, i0 + kWarps - 1);
  for (int64_t j0 = 0; j0 <= last; j0 += kTile) {
    __syncthreads();
    load_kv_tile(s, k, v, b, kvh, j0, Ks, Vs, Dp);
    __syncthreads();
    if (!active || j0 > i) continue;
    const int64_t j = j0 + lane;
    float ds = 0.f;
    if (j <= i) {
      float dot = 0.f, dp = 0.f;
      for (int64_t d = 0; d < D; ++d) {
        dot += Qs[warp * D + d] * Ks[lane * Dp + d];
        dp += dOs[warp * D + d] * Vs[lane * Dp + d];
      }
      const float p = __expf(dot * scale - L);
      ds = p * (dp - dl);
    }
    for (int r = 0; r < kTile; ++r) {
      const float dr = __shfl_sync(0xffffffffu, ds, r);
      for (int c = 0; c < kMaxDPerLane; ++c) {
        const int64_t d = lane + 32 * c;
        if (d < D) acc[c] += dr * Ks[r * Dp + d];
      }
    }
  }
  if (!active) return;
  for (int c = 0; c < kMaxDPerLane; ++c) {
    const int64_t d = lane + 32 * c;
    if (d < D) dq[(b * s.T + i) * s.q_stride + h * D + d] = acc[c] * scale;
  }
}

// dK_j = scale * sum_{h in group, i >= j} dS_ij Q_i, dV_j = sum P_ij dO_i; warp per key row.
__global__ void attn_dkv_kernel(kernels::AttnShape s, const float* q, const float* k, const float* v, const float* lse,
                                const float* delta, const float* dout, float* dk, float* dv, float scale) {
  extern __shared__ float smem[];
  const int64_t D = s.D, Dp = D + 1;
  float* Qs = smem;               // [kTile][D + 1]
  float* dOs = Qs + kTile * Dp;   // [kTile][D + 1]
  float* Ls = dOs + kTile * Dp;   // [kTile]
  float* Ds = Ls + kTile;         // [kTile]
  float* Kw = Ds + kTile;         // [kWarps][D]
  float* Vw = Kw + kWarps * D;    // [kWarps][D]
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t b = blockIdx.z, kvh = blockIdx.y, group = s.H / s.Hkv;
  const int64_t j0 = int64_t{blockIdx.x} * kWarps, j = j0 + warp;
  const bool active = j < s.T;
  if (active)
    for (int64_t d = lane; d < D; d += 32) {
      Kw[warp * D + d] = k[(b * s.T + j) * s.kv_stride + kvh * D + d];
      Vw[warp * D + d] = v[(b * s.T + j) * s.kv_stride + kvh * D + d];
    }
  float ak[kMaxDPerLane], av[kMaxDPerLane];
  for (int c = 0; c < kMaxDPerLane; ++c) ak[c] = av[c] = 0.f;
  for (int64_t hh = 0; hh < group; ++hh) {
    const int64_t h = kvh * group + hh;
    for (int64_t t0 = (j0 / kTile) * kTile; t0 < s.T; t0 += kTile) {
      __syncthreads();
      for (int64_t e = threadIdx.x; e < kTile * D; e += blockDim.x) {
        const int64_t r = e / D, d = e % D, i = t0 + r;
        const bool in = i < s.T;
        Qs[r * Dp + d] = in ? q[(b * s.T + i) * s.q_stride + h * D + d] : 0.f;
        dOs[r * Dp + d] = in ? dout[(b * s.T + i) * s.o_stride + h * D + d] : 0.f;
      }
      for (int64_t r = threadIdx.x; r < kTile; r += blockDim.x) {
        const int64_t i = t0 + r;
        Ls[r] = i < s.T ? lse[(b * s.H + h) * s.T + i] : 0.f;
        Ds[r] = i < s.T ? delta[(b * s.H + h) * s.T + i] : 0.f;
      }
      __syncthreads();
      if (!active || t0 + kTile - 1 < j) continue;
      const int64_t i = t0 + lane;
      float p = 0.f, ds = 0.f;
      if (i >= j && i < s.T) {
        float dot = 0.f, dp = 0.f;
        for (int64_t d = 0; d < D; ++d) {
          dot += Qs[lane * Dp + d] * Kw[warp * D + d];
          dp += dOs[lane * Dp + d] * Vw[warp * D + d];
        }
        p = __expf(dot * scale - Ls[lane]);
        ds = p * (dp - Ds[lane]);
      }
      for (int r = 0; r < kTile; ++r) {
        const float pr = __shfl_sync(0xffffffffu, p, r), dr = __shfl_sync(0xffffffffu, ds, r);
        for (int c = 0; c < kMaxDPerLane; ++c) {
          const int64_t d = lane + 32 * c;
          if (d < D) {
            av[c] += pr * dOs[r * Dp + d];
            ak[c] += dr * Qs[r * Dp + d];
          }
        }
      }
    }
  }
  if (!active) return;
  for (int c = 0; c < kMaxDPerLane; ++c) {
    const int64_t d = lane + 32 * c;
    if (d < D) {
      dk[(b * s.T + j) * s.kv_stride + kvh * D + d] = ak[c] * scale;
      dv[(b * s.T + j) * s.kv_stride + kvh * D + d] = av[c];
    }
  }
}

void check_shape(const kernels::AttnShape& s) {
  TEMPER_CHECK(s.D > 0 && s.D <= 32 * kMaxDPerLane) << "CUDA attention: head dim " << s.D << " outside [1, 256]";
  TEMPER_CHECK(s.Hkv > 0 && s.H % s.Hkv == 0) << "CUDA attention: " << s.H << " heads not a multiple of " << s.Hkv
                                              << " KV heads";
}


}  // namespace

void attention_fwd(const kernels::AttnShape& s, const float* q, const float* k, const float* v, float* o, float* lse,
                   cudaStream_t st) {
  check_shape(s);
  if (s.B * s.T == 0) return;
  const float scale = 1.f / std::sqrt(static_cast<float>(s.D));
  dim3 grid(static_cast<unsigned>((s.T + kWarps - 1) / kWarps), static_cast<unsigned>(s.H), static_cast<unsigned>(s.B));
  const size_t smem = sizeof(float) * (kTile * (s.D + 1) + kTile * s.D + kWarps * s.D);
  dev::launch(attn_fwd_kernel, grid, dim3(kWarps * 32), smem, st, "attention_fwd", s, q, k, v, o, lse, scale);
}

void attention_bwd(const kernels::AttnShape& s, const float* q, const float* k, const float* v, const float* o,
                   const float* lse, const float* dout, float* dq, float* dk, float* dv, float* delta, cudaStream_t st) {
  check_shape(s);
  if (s.B * s.T == 0) return;
  const float scale = 1.f / std::sqrt(static_cast<float>(s.D));
  const int64_t rows = s.B * s.H * s.T;
  dev::launch(attn_delta_kernel, dim3(static_cast<unsigned>((rows + kWarps - 1) / kWarps)), dim3(kWarps * 32), 0, st,
         "attention_delta", s, o, dout, delta);
  dim3 grid_q(static_cast<unsigned>((s.T + kWarps - 1) / kWarps), static_cast<unsigned>(s.H), static_cast<unsigned>(s.B));
  const size_t smem_q = sizeof(float) * (2 * kTile * (s.D + 1) + 2 * kWarps * s.D);
  dev::launch(attn_dq_kernel, grid_q, dim3(kWarps * 32), smem_q, st, "attention_dq", s, q, k, v, lse, delta, dout, dq, scale);
  dim3 grid_kv(static_cast<unsigned>((s.T + kWarps - 1) / kWarps), static_cast<unsigned>(s.Hkv),
               static_cast<unsigned>(s.B));
  const size_t smem_kv = sizeof(float) * (2 * kTile * (s.D + 1) + 2 * kTile + 2 * kWarps * s.D);
  dev::launch(attn_dkv_kernel, grid_kv, dim3(kWarps * 32), smem_kv, st, "attention_dkv", s, q, k, v, lse, delta, dout, dk,
         dv, scale);
}

}  // namespace temper::cuda
