// Causal GQA flash attention (training) on the device; see attention.h (paged decode attention:
// paged_attention.cu). Scores are scaled by attn_scale(s.opt) (1/sqrt(D) by default), soft-capped where
// s.opt.softcap > 0, and masked causally and to s.opt.window; the saved lse is of those scores, as on
// the CPU. With a window, key tiles wholly outside every row's window of a block are never staged.
// Blocks of 8 warps cover 32 rows (query rows in the forward and dQ passes, key rows in the dK/dV
// pass): each warp carries R = 4 rows, so every value read from a shared-memory tile serves four
// rows; tiles of 32 rows of the other side are staged by the whole block with four loads in flight
// per thread (16-byte loads when the strides allow). DPL = ceil(D / 32) channels per lane.
#include <cmath>
#include <cstdint>
#include <initializer_list>

#include "temper/core/error.h"
#include "temper/kernels/cuda/attention.h"
#include "temper/kernels/cuda/common.cuh"

namespace temper::cuda {
namespace {

constexpr int kWarps = 8;  // warps per block
constexpr int kRows = 4;   // rows per warp
constexpr int kBlockRows = kWarps * kRows;
constexpr int kTile = 32;  // rows of the other side per shared-memory tile

// Rows [r0, r0 + kTile) of a [rows, stride] matrix's columns [col, col + D) into dst (row stride
// dst_stride), zeros for rows at or past `valid`. The whole block calls it; each thread issues up to
// four loads before its first store. vec: 16-byte loads (D, stride and col multiples of 4, src aligned).
__device__ void stage(float* dst, int64_t dst_stride, const float* src, int64_t stride, int64_t col, int64_t r0,
                      int64_t valid, int64_t D, bool vec) {
  const int tid = threadIdx.x, nt = blockDim.x;
  if (vec) {
    const int64_t D4 = D / 4, total = kTile * D4;
    for (int64_t e0 = tid; e0 < total; e0 += 4 * nt) {
      float4 x[4];
#pragma unroll
      for (int u = 0; u < 4; ++u) {
        const int64_t e = e0 + int64_t{u} * nt, r = e / D4, d4 = e % D4;
        x[u] = make_float4(0.f, 0.f, 0.f, 0.f);
        if (e < total && r0 + r < valid) x[u] = reinterpret_cast<const float4*>(src + (r0 + r) * stride + col)[d4];
      }
#pragma unroll
      for (int u = 0; u < 4; ++u) {
        const int64_t e = e0 + int64_t{u} * nt, r = e / D4, d4 = e % D4;
        if (e < total) {
          float* p = dst + r * dst_stride + 4 * d4;
          p[0] = x[u].x;
          p[1] = x[u].y;
          p[2] = x[u].z;
          p[3] = x[u].w;
        }
      }
    }
  } else {
    const int64_t total = kTile * D;
    for (int64_t e0 = tid; e0 < total; e0 += 4 * nt) {
      float x[4];
#pragma unroll
      for (int u = 0; u < 4; ++u) {
        const int64_t e = e0 + int64_t{u} * nt, r = e / D, d = e % D;
        x[u] = (e < total && r0 + r < valid) ? src[(r0 + r) * stride + col + d] : 0.f;
      }
#pragma unroll
      for (int u = 0; u < 4; ++u) {
        const int64_t e = e0 + int64_t{u} * nt;
        if (e < total) dst[(e / D) * dst_stride + e % D] = x[u];
      }
    }
  }
}

// The warp's own R rows (row stride D) from global memory.
__device__ void load_own_rows(float* dst, const float* src, int64_t stride, int64_t col, int64_t first, int64_t T,
                              int64_t D) {
  const int lane = threadIdx.x & 31;
  for (int rr = 0; rr < kRows; ++rr)
    for (int64_t d = lane; d < D; d += 32)
      dst[rr * D + d] = first + rr < T ? src[(first + rr) * stride + col + d] : 0.f;
}

// The first key tile a block of query rows from i0 on can see (0 without a window).
__device__ __forceinline__ int64_t first_key_tile(int64_t i0, int64_t window) {
  return window > 0 && i0 - window + 1 > 0 ? (i0 - window + 1) / kTile * kTile : 0;
}

// Whether query i sees key j (causal and, with a window, j > i - window).
__device__ __forceinline__ bool sees(int64_t i, int64_t j, int64_t window) {
  return j <= i && (window <= 0 || j > i - window);
}

// The scaled score, soft-capped when cap > 0; g gets d(capped)/d(scaled) = 1 - tanh^2.
__device__ __forceinline__ float capped_score(float dot, float scale, float cap, float* g) {
  const float x = dot * scale;
  if (cap <= 0.f) {
    *g = 1.f;
    return x;
  }
  const float th = tanhf(x / cap);
  *g = 1.f - th * th;
  return cap * th;
}

// ---- forward ------------------------------------------------------------------------------------
template <int DPL>
__global__ void attn_fwd_kernel(kernels::AttnShape s, const float* q, const float* k, const float* v, float* o,
                                float* lse, float scale, float cap, bool vec) {
  extern __shared__ float smem[];
  const int64_t D = s.D, Dp = D + 1;
  float* Ks = smem;             // [kTile][D + 1]
  float* Vs = Ks + kTile * Dp;  // [kTile][D]
  float* Qs = Vs + kTile * D;   // [kBlockRows][D]
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t b = blockIdx.z, h = blockIdx.y, kvh = h / (s.H / s.Hkv);
  const int64_t i0 = int64_t{blockIdx.x} * kBlockRows, iw = i0 + warp * kRows;  // the warp's first row
  float* Qw = Qs + warp * kRows * D;
  load_own_rows(Qw, q + b * s.T * s.q_stride, s.q_stride, h * D, iw, s.T, D);
  float acc[kRows][DPL], m[kRows], l[kRows];
#pragma unroll
  for (int rr = 0; rr < kRows; ++rr) {
    m[rr] = -INFINITY;
    l[rr] = 0.f;
#pragma unroll
    for (int c = 0; c < DPL; ++c) acc[rr][c] = 0.f;
  }
  const int64_t last = min(s.T - 1, i0 + kBlockRows - 1), W = s.opt.window;
  const float* kb = k + b * s.T * s.kv_stride;
  const float* vb = v + b * s.T * s.kv_stride;
  for (int64_t j0 = first_key_tile(i0, W); j0 <= last; j0 += kTile) {
    __syncthreads();
    stage(Ks, Dp, kb, s.kv_stride, kvh * D, j0, s.T, D, vec);
    stage(Vs, D, vb, s.kv_stride, kvh * D, j0, s.T, D, vec);
    __syncthreads();
    // no row of this warp sees the tile (all keys after its rows, or before their windows)
    if (iw >= s.T || j0 > iw + kRows - 1 || (W > 0 && j0 + kTile - 1 <= iw - W)) continue;
    const int64_t j = j0 + lane;
    float dot[kRows];
#pragma unroll
    for (int rr = 0; rr < kRows; ++rr) dot[rr] = 0.f;
    for (int64_t d = 0; d < D; ++d) {
      const float kd = Ks[lane * Dp + d];
#pragma unroll
      for (int rr = 0; rr < kRows; ++rr) dot[rr] += Qw[rr * D + d] * kd;
    }
    float p[kRows];
#pragma unroll
    for (int rr = 0; rr < kRows; ++rr) {
      const int64_t i = iw + rr;
      const bool see = sees(i, j, W) && i < s.T;
      float g;
      const float sc = see ? capped_score(dot[rr], scale, cap, &g) : -INFINITY;
      const float mx = dev::warp_max(sc);
      const float m_new = fmaxf(m[rr], mx);
      // a row that sees nothing of this tile (past T, all j > i, or before its window) keeps its state
      const bool live = m_new > -INFINITY;
      p[rr] = see ? __expf(sc - m_new) : 0.f;
      const float alpha = live ? __expf(m[rr] - m_new) : 1.f;
      l[rr] = l[rr] * alpha + dev::warp_sum(p[rr]);
#pragma unroll
      for (int c = 0; c < DPL; ++c) acc[rr][c] *= alpha;
      m[rr] = m_new;
    }
    for (int r = 0; r < kTile; ++r) {
      float vv[DPL];
#pragma unroll
      for (int c = 0; c < DPL; ++c) {
        const int64_t d = lane + 32 * c;
        vv[c] = d < D ? Vs[r * D + d] : 0.f;
      }
#pragma unroll
      for (int rr = 0; rr < kRows; ++rr) {
        const float pr = __shfl_sync(0xffffffffu, p[rr], r);
#pragma unroll
        for (int c = 0; c < DPL; ++c) acc[rr][c] += pr * vv[c];
      }
    }
  }
#pragma unroll
  for (int rr = 0; rr < kRows; ++rr) {
    const int64_t i = iw + rr;
    if (i >= s.T) continue;
    const float inv = 1.f / l[rr];
#pragma unroll
    for (int c = 0; c < DPL; ++c) {
      const int64_t d = lane + 32 * c;
      if (d < D) o[(b * s.T + i) * s.o_stride + h * D + d] = acc[rr][c] * inv;
    }
    if (lane == 0) lse[(b * s.H + h) * s.T + i] = m[rr] + logf(l[rr]);
  }
}

// ---- backward -----------------------------------------------------------------------------------
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

// dQ_i = scale * sum_j P_ij (dP_ij - delta_i) K_j; the warp's rows are query rows.
template <int DPL>
__global__ void attn_dq_kernel(kernels::AttnShape s, const float* q, const float* k, const float* v, const float* lse,
                               const float* delta, const float* dout, float* dq, float scale, float cap, bool vec) {
  extern __shared__ float smem[];
  const int64_t D = s.D, Dp = D + 1;
  float* Ks = smem;                  // [kTile][D + 1]
  float* Vs = Ks + kTile * Dp;       // [kTile][D + 1]
  float* Qs = Vs + kTile * Dp;       // [kBlockRows][D]
  float* dOs = Qs + kBlockRows * D;  // [kBlockRows][D]
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t b = blockIdx.z, h = blockIdx.y, kvh = h / (s.H / s.Hkv);
  const int64_t i0 = int64_t{blockIdx.x} * kBlockRows, iw = i0 + warp * kRows;
  float* Qw = Qs + warp * kRows * D;
  float* dOw = dOs + warp * kRows * D;
  load_own_rows(Qw, q + b * s.T * s.q_stride, s.q_stride, h * D, iw, s.T, D);
  load_own_rows(dOw, dout + b * s.T * s.o_stride, s.o_stride, h * D, iw, s.T, D);
  float L[kRows], dl[kRows], acc[kRows][DPL];
#pragma unroll
  for (int rr = 0; rr < kRows; ++rr) {
    const int64_t i = iw + rr;
    L[rr] = i < s.T ? lse[(b * s.H + h) * s.T + i] : 0.f;
    dl[rr] = i < s.T ? delta[(b * s.H + h) * s.T + i] : 0.f;
#pragma unroll
    for (int c = 0; c < DPL; ++c) acc[rr][c] = 0.f;
  }
  const int64_t last = min(s.T - 1, i0 + kBlockRows - 1), W = s.opt.window;
  const float* kb = k + b * s.T * s.kv_stride;
  const float* vb = v + b * s.T * s.kv_stride;
  for (int64_t j0 = first_key_tile(i0, W); j0 <= last; j0 += kTile) {
    __syncthreads();
    stage(Ks, Dp, kb, s.kv_stride, kvh * D, j0, s.T, D, vec);
    stage(Vs, Dp, vb, s.kv_stride, kvh * D, j0, s.T, D, vec);
    __syncthreads();
    if (iw >= s.T || j0 > iw + kRows - 1 || (W > 0 && j0 + kTile - 1 <= iw - W)) continue;
    const int64_t j = j0 + lane;
    float dot[kRows], dp[kRows];
#pragma unroll
    for (int rr = 0; rr < kRows; ++rr) dot[rr] = dp[rr] = 0.f;
    for (int64_t d = 0; d < D; ++d) {
      const float kd = Ks[lane * Dp + d], vd = Vs[lane * Dp + d];
#pragma unroll
      for (int rr = 0; rr < kRows; ++rr) {
        dot[rr] += Qw[rr * D + d] * kd;
        dp[rr] += dOw[rr * D + d] * vd;
      }
    }
    float ds[kRows];
#pragma unroll
    for (int rr = 0; rr < kRows; ++rr) {
      const int64_t i = iw + rr;
      ds[rr] = 0.f;
      if (sees(i, j, W) && i < s.T) {
        float g;
        const float sc = capped_score(dot[rr], scale, cap, &g);
        ds[rr] = __expf(sc - L[rr]) * (dp[rr] - dl[rr]) * g;
      }
    }
    for (int r = 0; r < kTile; ++r) {
      float kk[DPL];
#pragma unroll
      for (int c = 0; c < DPL; ++c) {
        const int64_t d = lane + 32 * c;
        kk[c] = d < D ? Ks[r * Dp + d] : 0.f;
      }
#pragma unroll
      for (int rr = 0; rr < kRows; ++rr) {
        const float dr = __shfl_sync(0xffffffffu, ds[rr], r);
#pragma unroll
        for (int c = 0; c < DPL; ++c) acc[rr][c] += dr * kk[c];
      }
    }
  }
#pragma unroll
  for (int rr = 0; rr < kRows; ++rr) {
    const int64_t i = iw + rr;
    if (i >= s.T) continue;
#pragma unroll
    for (int c = 0; c < DPL; ++c) {
      const int64_t d = lane + 32 * c;
      if (d < D) dq[(b * s.T + i) * s.q_stride + h * D + d] = acc[rr][c] * scale;
    }
  }
}

// dK_j = scale * sum_{h in group, i >= j} dS_ij Q_i, dV_j = sum P_ij dO_i; the warp's rows are key rows.
// partial == nullptr: blockIdx.y is a KV head and the block sums its group's query heads in order.
// Else blockIdx.y is one query head, whose terms go to partial [B*T, H, D] (dK) and partial + B*T*H*D (dV);
// attn_dkv_reduce_kernel then adds the group's heads in order (the same sums, 7x more blocks for Qwen).
template <int DPL>
__global__ void attn_dkv_kernel(kernels::AttnShape s, const float* q, const float* k, const float* v, const float* lse,
                                const float* delta, const float* dout, float* dk, float* dv, float scale, float cap,
                                bool vec, float* partial) {
  extern __shared__ float smem[];
  const int64_t D = s.D, Dp = D + 1;
  float* Qs = smem;                 // [kTile][D + 1]
  float* dOs = Qs + kTile * Dp;     // [kTile][D + 1]
  float* Ls = dOs + kTile * Dp;     // [kTile]
  float* Ds = Ls + kTile;           // [kTile]
  float* Kw = Ds + kTile;           // [kBlockRows][D]
  float* Vw = Kw + kBlockRows * D;  // [kBlockRows][D]
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t b = blockIdx.z, group = s.H / s.Hkv;
  const int64_t kvh = partial ? blockIdx.y / group : blockIdx.y;
  const int64_t h_first = partial ? blockIdx.y : kvh * group, h_end = partial ? h_first + 1 : h_first + group;
  const int64_t j0 = int64_t{blockIdx.x} * kBlockRows, jw = j0 + warp * kRows;  // the warp's first key row
  float* Kr = Kw + warp * kRows * D;
  float* Vr = Vw + warp * kRows * D;
  load_own_rows(Kr, k + b * s.T * s.kv_stride, s.kv_stride, kvh * D, jw, s.T, D);
  load_own_rows(Vr, v + b * s.T * s.kv_stride, s.kv_stride, kvh * D, jw, s.T, D);
  float ak[kRows][DPL], av[kRows][DPL];
#pragma unroll
  for (int rr = 0; rr < kRows; ++rr)
#pragma unroll
    for (int c = 0; c < DPL; ++c) ak[rr][c] = av[rr][c] = 0.f;
  const float* qb = q + b * s.T * s.q_stride;
  const float* ob = dout + b * s.T * s.o_stride;
  const int64_t W = s.opt.window;
  // queries i >= j0 (j0 is a multiple of kTile), and with a window i < (the block's last key) + W
  const int64_t t_end = W > 0 ? min(s.T, j0 + kBlockRows - 1 + W) : s.T;
  for (int64_t h = h_first; h < h_end; ++h) {
    for (int64_t t0 = j0; t0 < t_end; t0 += kTile) {
      __syncthreads();
      stage(Qs, Dp, qb, s.q_stride, h * D, t0, s.T, D, vec);
      stage(dOs, Dp, ob, s.o_stride, h * D, t0, s.T, D, vec);
      for (int64_t r = threadIdx.x; r < kTile; r += blockDim.x) {
        const int64_t i = t0 + r;
        Ls[r] = i < s.T ? lse[(b * s.H + h) * s.T + i] : 0.f;
        Ds[r] = i < s.T ? delta[(b * s.H + h) * s.T + i] : 0.f;
      }
      __syncthreads();
      // every query of the tile precedes the warp's keys, or is past their windows
      if (jw >= s.T || t0 + kTile - 1 < jw || (W > 0 && t0 > jw + kRows - 2 + W)) continue;
      const int64_t i = t0 + lane;
      float dot[kRows], dp[kRows];
#pragma unroll
      for (int rr = 0; rr < kRows; ++rr) dot[rr] = dp[rr] = 0.f;
      for (int64_t d = 0; d < D; ++d) {
        const float qd = Qs[lane * Dp + d], od = dOs[lane * Dp + d];
#pragma unroll
        for (int rr = 0; rr < kRows; ++rr) {
          dot[rr] += qd * Kr[rr * D + d];
          dp[rr] += od * Vr[rr * D + d];
        }
      }
      float p[kRows], ds[kRows];
#pragma unroll
      for (int rr = 0; rr < kRows; ++rr) {
        const int64_t j = jw + rr;
        p[rr] = ds[rr] = 0.f;
        if (sees(i, j, W) && i < s.T && j < s.T) {
          float g;
          p[rr] = __expf(capped_score(dot[rr], scale, cap, &g) - Ls[lane]);
          ds[rr] = p[rr] * (dp[rr] - Ds[lane]) * g;
        }
      }
      for (int r = 0; r < kTile; ++r) {
        float qq[DPL], oo[DPL];
#pragma unroll
        for (int c = 0; c < DPL; ++c) {
          const int64_t d = lane + 32 * c;
          qq[c] = d < D ? Qs[r * Dp + d] : 0.f;
          oo[c] = d < D ? dOs[r * Dp + d] : 0.f;
        }
#pragma unroll
        for (int rr = 0; rr < kRows; ++rr) {
          const float pr = __shfl_sync(0xffffffffu, p[rr], r), dr = __shfl_sync(0xffffffffu, ds[rr], r);
#pragma unroll
          for (int c = 0; c < DPL; ++c) {
            av[rr][c] += pr * oo[c];
            ak[rr][c] += dr * qq[c];
          }
        }
      }
    }
  }
#pragma unroll
  for (int rr = 0; rr < kRows; ++rr) {
    const int64_t j = jw + rr;
    if (j >= s.T) continue;
#pragma unroll
    for (int c = 0; c < DPL; ++c) {
      const int64_t d = lane + 32 * c;
      if (d >= D) continue;
      if (partial) {
        const int64_t at = ((b * s.T + j) * s.H + h_first) * D + d;
        partial[at] = ak[rr][c] * scale;
        partial[s.B * s.T * s.H * D + at] = av[rr][c];
      } else {
        dk[(b * s.T + j) * s.kv_stride + kvh * D + d] = ak[rr][c] * scale;
        dv[(b * s.T + j) * s.kv_stride + kvh * D + d] = av[rr][c];
      }
    }
  }
}

// dK, dV of each (token, KV head, channel): its group's query heads' partials added in head order.
__global__ void attn_dkv_reduce_kernel(kernels::AttnShape s, const float* partial, float* dk, float* dv) {
  const int64_t group = s.H / s.Hkv, D = s.D, total = s.B * s.T * s.Hkv * D, half = s.B * s.T * s.H * D;
  for (int64_t e = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; e < total; e += int64_t{gridDim.x} * blockDim.x) {
    const int64_t d = e % D, kvh = (e / D) % s.Hkv, row = e / (D * s.Hkv);
    const float* pk = partial + (row * s.H + kvh * group) * D + d;
    float sk = 0.f, sv = 0.f;
    for (int64_t g = 0; g < group; ++g) {
      sk += pk[g * D];
      sv += pk[half + g * D];
    }
    dk[row * s.kv_stride + kvh * D + d] = sk;
    dv[row * s.kv_stride + kvh * D + d] = sv;
  }
}

void check_shape(const kernels::AttnShape& s) {
  TEMPER_CHECK(s.causal) << "CUDA attention: bidirectional attention (AttnShape::causal false) is CPU-only";
  TEMPER_CHECK(s.D > 0 && s.D <= 256) << "CUDA attention: head dim " << s.D << " outside [1, 256]";
  TEMPER_CHECK(s.B <= 65535 && s.H <= 65535)
      << "CUDA attention: " << s.B << " sequences of " << s.H << " heads (at most 65535 each in one call)";
  TEMPER_CHECK(s.Hkv > 0 && s.H % s.Hkv == 0) << "CUDA attention: " << s.H << " heads not a multiple of " << s.Hkv
                                              << " KV heads";
}

bool aligned16(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % 16 == 0;
}

// 16-byte tile loads: every row start and column offset a multiple of 4 floats, bases aligned.
bool vector_loads(const kernels::AttnShape& s, std::initializer_list<const void*> bases) {
  if (s.D % 4 || s.q_stride % 4 || s.kv_stride % 4 || s.o_stride % 4) return false;
  for (const void* p : bases)
    if (!aligned16(p)) return false;
  return true;
}

}  // namespace

void attention_fwd(const kernels::AttnShape& s, const float* q, const float* k, const float* v, float* o, float* lse,
                   cudaStream_t st) {
  check_shape(s);
  kernels::attn_opts_check(s.opt, "CUDA attention_fwd");
  if (s.B * s.T == 0) return;
  const float scale = kernels::attn_scale(s.opt, s.D), cap = s.opt.softcap;
  const bool vec = vector_loads(s, {q, k, v});
  dim3 grid(static_cast<unsigned>((s.T + kBlockRows - 1) / kBlockRows), static_cast<unsigned>(s.H),
            static_cast<unsigned>(s.B));
  const size_t smem = sizeof(float) * (kTile * (s.D + 1) + kTile * s.D + kBlockRows * s.D);
  const dim3 block(kWarps * 32);
  if (s.D <= 64)
    dev::launch(attn_fwd_kernel<2>, grid, block, smem, st, "attention_fwd", s, q, k, v, o, lse, scale, cap, vec);
  else if (s.D <= 128)
    dev::launch(attn_fwd_kernel<4>, grid, block, smem, st, "attention_fwd", s, q, k, v, o, lse, scale, cap, vec);
  else
    dev::launch(attn_fwd_kernel<8>, grid, block, smem, st, "attention_fwd", s, q, k, v, o, lse, scale, cap, vec);
}

int64_t attention_bwd_workspace_floats(const kernels::AttnShape& s) {
  return s.H == s.Hkv ? 0 : 2 * s.B * s.T * s.H * s.D;
}

void attention_bwd(const kernels::AttnShape& s, const float* q, const float* k, const float* v, const float* o,
                   const float* lse, const float* dout, float* dq, float* dk, float* dv, float* delta, cudaStream_t st,
                   float* dkv_partial) {
  check_shape(s);
  kernels::attn_opts_check(s.opt, "CUDA attention_bwd");
  if (s.B * s.T == 0) return;
  const float scale = kernels::attn_scale(s.opt, s.D), cap = s.opt.softcap;
  const int64_t rows = s.B * s.H * s.T;
  const bool vec = vector_loads(s, {q, k, v, dout});
  const dim3 block(kWarps * 32);
  dev::launch(attn_delta_kernel, dim3(static_cast<unsigned>((rows + kWarps - 1) / kWarps)), block, 0, st,
              "attention_delta", s, o, dout, delta);
  const dim3 grid_q(static_cast<unsigned>((s.T + kBlockRows - 1) / kBlockRows), static_cast<unsigned>(s.H),
                    static_cast<unsigned>(s.B));
  const size_t smem_q = sizeof(float) * (2 * kTile * (s.D + 1) + 2 * kBlockRows * s.D);
  float* partial = s.H == s.Hkv ? nullptr : dkv_partial;  // without a group there is nothing to split
  const dim3 grid_kv(static_cast<unsigned>((s.T + kBlockRows - 1) / kBlockRows),
                     static_cast<unsigned>(partial ? s.H : s.Hkv), static_cast<unsigned>(s.B));
  const size_t smem_kv = sizeof(float) * (2 * kTile * (s.D + 1) + 2 * kTile + 2 * kBlockRows * s.D);
  if (s.D <= 64) {
    dev::launch(attn_dq_kernel<2>, grid_q, block, smem_q, st, "attention_dq", s, q, k, v, lse, delta, dout, dq, scale,
                cap, vec);
    dev::launch(attn_dkv_kernel<2>, grid_kv, block, smem_kv, st, "attention_dkv", s, q, k, v, lse, delta, dout, dk, dv,
                scale, cap, vec, partial);
  } else if (s.D <= 128) {
    dev::launch(attn_dq_kernel<4>, grid_q, block, smem_q, st, "attention_dq", s, q, k, v, lse, delta, dout, dq, scale,
                cap, vec);
    dev::launch(attn_dkv_kernel<4>, grid_kv, block, smem_kv, st, "attention_dkv", s, q, k, v, lse, delta, dout, dk, dv,
                scale, cap, vec, partial);
  } else {
    dev::launch(attn_dq_kernel<8>, grid_q, block, smem_q, st, "attention_dq", s, q, k, v, lse, delta, dout, dq, scale,
                cap, vec);
    dev::launch(attn_dkv_kernel<8>, grid_kv, block, smem_kv, st, "attention_dkv", s, q, k, v, lse, delta, dout, dk, dv,
                scale, cap, vec, partial);
  }
  if (partial)
    dev::launch(attn_dkv_reduce_kernel, dim3(dev::blocks_for(s.B * s.T * s.Hkv * s.D, 256)), dim3(256), 0, st,
                "attention_dkv_reduce", s, static_cast<const float*>(partial), dk, dv);
}

}  // namespace temper::cuda
