// Paged decode attention on the device (attention.h). Flash-decoding: the positions a row can hold
// are cut into at most kMaxSplits splits of whole 32-position tiles; one block of 4 warps per
// (split, KV head, row) stages each tile's K and V rows in shared memory with all its threads
// (16-byte loads issued four at a time, so a tile costs about one memory round trip), and each warp
// runs the online softmax for some of the KV head's query heads (K and V are read once for the
// whole group). A second kernel merges the splits' (max, sum, weighted V) per (row, head) and
// writes f32 and/or bf16 output. Splits past a row's length do nothing. Without a workspace, or
// for head dims not a multiple of 4 or more than 16 query heads per KV head, the first kernel (one
// warp per row and head, positions in sequence) serves. With a window a row's positions start at
// first = max(0, len - window): the splits cut [first, len) (sized for min(max_len, window)
// positions), and no block before first is read (its table entry may be -1).
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "temper/core/error.h"
#include "temper/kernels/cuda/attention.h"
#include "temper/kernels/cuda/common.cuh"

namespace temper::cuda {
namespace {

constexpr int kTile = 32;         // positions per shared-memory tile
constexpr int kMaxDPerLane = 8;   // D <= 256
constexpr int kSplitWarps = 4;    // warps per split block
constexpr int kHeadsPerWarp = 4;  // query heads per KV head <= kSplitWarps * kHeadsPerWarp
constexpr int64_t kMaxSplits = 32;

int64_t split_len(int64_t max_len) {
  const int64_t per = (max_len + kMaxSplits - 1) / kMaxSplits;
  return std::max<int64_t>(kTile, (per + kTile - 1) / kTile * kTile);
}
int64_t splits_of(int64_t max_len) {
  return std::max<int64_t>(1, (max_len + split_len(max_len) - 1) / split_len(max_len));
}

// The first position row `len` long sees (0 without a window).
__device__ __forceinline__ int64_t first_position(int64_t len, int64_t window) {
  return window > 0 && len > window ? len - window : 0;
}

// The scaled score, soft-capped when cap > 0.
__device__ __forceinline__ float paged_score(float dot, float scale, float cap) {
  const float x = dot * scale;
  return cap > 0.f ? cap * tanhf(x / cap) : x;
}

bool aligned16(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % 16 == 0;
}

bool split_fits(const PagedAttnDeviceArgs& a) {
  return a.D % 4 == 0 && a.H / a.Hkv <= kSplitWarps * kHeadsPerWarp && a.workspace != nullptr && a.max_len > 0 &&
         aligned16(a.k_pool) && aligned16(a.v_pool);  // the tiles' 16-byte loads
}

// ---- one warp per (query row, head), positions in sequence (the fallback) ------------------------
__global__ void paged_attn_kernel(PagedAttnDeviceArgs a, float scale, float cap) {
  extern __shared__ float smem[];
  const int64_t D = a.D, Dp = D + 1;
  float* Ks = smem;             // [kTile][D + 1]
  float* Qs = Ks + kTile * Dp;  // [D]
  const int lane = threadIdx.x;
  const int64_t row = blockIdx.x, h = blockIdx.y, kvh = h / (a.H / a.Hkv);
  const int32_t* table = a.block_tables + row * a.table_stride;
  const int64_t len = a.kv_len[row], row_floats = a.Hkv * D;
  for (int64_t d = lane; d < D; d += 32) Qs[d] = a.q[row * a.q_stride + h * D + d];
  float acc[kMaxDPerLane];
  for (int c = 0; c < kMaxDPerLane; ++c) acc[c] = 0.f;
  float m = -INFINITY, l = 0.f;
  for (int64_t p0 = first_position(len, a.opt.window); p0 < len; p0 += kTile) {
    __syncwarp();
    for (int r = 0; r < kTile && p0 + r < len; ++r) {
      const int64_t p = p0 + r;
      const float* kr =
          a.k_pool + (int64_t{table[p / a.block_size]} * a.block_size + p % a.block_size) * row_floats + kvh * D;
      for (int64_t d = lane; d < D; d += 32) Ks[r * Dp + d] = kr[d];
    }
    __syncwarp();
    const int64_t p = p0 + lane;
    float sc = -INFINITY;
    if (p < len) {
      float dot = 0.f;
      for (int64_t d = 0; d < D; ++d) dot += Qs[d] * Ks[lane * Dp + d];
      sc = paged_score(dot, scale, cap);
    }
    const float m_new = fmaxf(m, dev::warp_max(sc));
    const float pr_own = p < len ? __expf(sc - m_new) : 0.f;
    const float alpha = __expf(m - m_new);
    l = l * alpha + dev::warp_sum(pr_own);
    for (int c = 0; c < kMaxDPerLane; ++c) acc[c] *= alpha;
    for (int r = 0; r < kTile && p0 + r < len; ++r) {
      const float pr = __shfl_sync(0xffffffffu, pr_own, r);
      const int64_t pp = p0 + r;
      const float* vr =
          a.v_pool + (int64_t{table[pp / a.block_size]} * a.block_size + pp % a.block_size) * row_floats + kvh * D;
      for (int c = 0; c < kMaxDPerLane; ++c) {
        const int64_t d = lane + 32 * c;
        if (d < D) acc[c] += pr * vr[d];
      }
    }
    m = m_new;
  }
  const float inv = l > 0.f ? 1.f / l : 0.f;
  for (int c = 0; c < kMaxDPerLane; ++c) {
    const int64_t d = lane + 32 * c;
    if (d < D) {
      const float out = acc[c] * inv;
      if (a.o) a.o[row * a.o_stride + h * D + d] = out;
      if (a.o16) reinterpret_cast<__nv_bfloat16*>(a.o16)[row * a.o_stride + h * D + d] = __float2bfloat16_rn(out);
    }
  }
}

// ---- split: block per (split, KV head, row) ------------------------------------------------------
// Partials in ws: [row][head][split] x (D + 2): running max, sum of exp, then the unnormalised V sum.
__global__ void paged_split_kernel(PagedAttnDeviceArgs a, float scale, float cap, int64_t split, int64_t nsplit,
                                   float* ws) {
  extern __shared__ float4 smem4[];  // 16-byte aligned: V rows are stored as float4
  float* smem = reinterpret_cast<float*>(smem4);
  const int64_t D = a.D, Dp = D + 1, G = a.H / a.Hkv, D4 = D / 4;
  float* Ks = smem;             // [kTile][D + 1]
  float* Vs = Ks + kTile * Dp;  // [kTile][D] (16-byte aligned: kTile * (D + 1) floats is a multiple of 4)
  float* Qs = Vs + kTile * D;   // [G][D]
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int64_t s = blockIdx.x, kvh = blockIdx.y, row = blockIdx.z;
  const int64_t len = a.kv_len[row], p_begin = first_position(len, a.opt.window) + s * split,
                p_end = min(len, p_begin + split);
  const int32_t* table = a.block_tables + row * a.table_stride;
  const int64_t row_floats = a.Hkv * D;
  for (int64_t e = tid; e < G * D; e += blockDim.x) Qs[e] = a.q[row * a.q_stride + (kvh * G) * D + e];
  float m[kHeadsPerWarp], l[kHeadsPerWarp], acc[kHeadsPerWarp][kMaxDPerLane];
#pragma unroll
  for (int hh = 0; hh < kHeadsPerWarp; ++hh) {
    m[hh] = -INFINITY;
    l[hh] = 0.f;
#pragma unroll
    for (int c = 0; c < kMaxDPerLane; ++c) acc[hh][c] = 0.f;
  }
  __syncthreads();
  for (int64_t p0 = p_begin; p0 < p_end; p0 += kTile) {
    const int64_t rows_here = min(int64_t{kTile}, p_end - p0), total4 = kTile * D4;
    for (int64_t e0 = tid; e0 < total4; e0 += 4 * blockDim.x) {
      float4 kr[4], vr[4];
#pragma unroll
      for (int u = 0; u < 4; ++u) {  // four loads in flight before the first store
        const int64_t e = e0 + u * blockDim.x, r = e / D4, d4 = e % D4;
        kr[u] = vr[u] = make_float4(0.f, 0.f, 0.f, 0.f);
        if (e < total4 && r < rows_here) {
          const int64_t p = p0 + r;
          const int64_t off =
              (int64_t{table[p / a.block_size]} * a.block_size + p % a.block_size) * row_floats + kvh * D;
          kr[u] = reinterpret_cast<const float4*>(a.k_pool + off)[d4];
          vr[u] = reinterpret_cast<const float4*>(a.v_pool + off)[d4];
        }
      }
#pragma unroll
      for (int u = 0; u < 4; ++u) {
        const int64_t e = e0 + u * blockDim.x, r = e / D4, d4 = e % D4;
        if (e < total4) {
          float* kd = Ks + r * Dp + 4 * d4;
          kd[0] = kr[u].x;
          kd[1] = kr[u].y;
          kd[2] = kr[u].z;
          kd[3] = kr[u].w;
          reinterpret_cast<float4*>(Vs + r * D)[d4] = vr[u];
        }
      }
    }
    __syncthreads();
#pragma unroll
    for (int hh = 0; hh < kHeadsPerWarp; ++hh) {
      const int64_t g = warp + hh * kSplitWarps;
      if (g < G) {
        const float* q = Qs + g * D;
        float sc = -INFINITY;
        if (lane < rows_here) {
          float dot = 0.f;
          for (int64_t d = 0; d < D; ++d) dot += q[d] * Ks[lane * Dp + d];
          sc = paged_score(dot, scale, cap);
        }
        const float m_new = fmaxf(m[hh], dev::warp_max(sc));  // finite: the tile has a position
        const float pr_own = lane < rows_here ? __expf(sc - m_new) : 0.f;
        const float alpha = __expf(m[hh] - m_new);
        l[hh] = l[hh] * alpha + dev::warp_sum(pr_own);
#pragma unroll
        for (int c = 0; c < kMaxDPerLane; ++c) acc[hh][c] *= alpha;
        for (int r = 0; r < rows_here; ++r) {
          const float pr = __shfl_sync(0xffffffffu, pr_own, r);
#pragma unroll
          for (int c = 0; c < kMaxDPerLane; ++c) {
            const int64_t d = lane + 32 * c;
            if (d < D) acc[hh][c] += pr * Vs[r * D + d];
          }
        }
        m[hh] = m_new;
      }
    }
    __syncthreads();  // the next tile overwrites Ks and Vs
  }
#pragma unroll
  for (int hh = 0; hh < kHeadsPerWarp; ++hh) {
    const int64_t g = warp + hh * kSplitWarps;
    if (g < G) {
      float* w = ws + ((row * a.H + kvh * G + g) * nsplit + s) * (D + 2);
      if (lane == 0) {
        w[0] = m[hh];
        w[1] = l[hh];
      }
#pragma unroll
      for (int c = 0; c < kMaxDPerLane; ++c) {
        const int64_t d = lane + 32 * c;
        if (d < D) w[2 + d] = acc[hh][c];
      }
    }
  }
}

// ---- combine: block per (row, head), thread per channel --------------------------------------------
__global__ void paged_combine_kernel(PagedAttnDeviceArgs a, int64_t split, int64_t nsplit, const float* ws) {
  const int64_t row = blockIdx.x, h = blockIdx.y, D = a.D;
  const int64_t len = a.kv_len[row], span = len - first_position(len, a.opt.window);
  const int64_t used = min(nsplit, (span + split - 1) / split);  // splits holding positions
  const float* w = ws + (row * a.H + h) * nsplit * (D + 2);
  float M = -INFINITY;
  for (int64_t s = 0; s < used; ++s) M = fmaxf(M, w[s * (D + 2)]);
  float L = 0.f;
  for (int64_t s = 0; s < used; ++s) L += w[s * (D + 2) + 1] * __expf(w[s * (D + 2)] - M);
  const float inv = L > 0.f ? 1.f / L : 0.f;
  for (int64_t d = threadIdx.x; d < D; d += blockDim.x) {
    float o = 0.f;
    for (int64_t s = 0; s < used; ++s) o += w[s * (D + 2) + 2 + d] * __expf(w[s * (D + 2)] - M);
    o *= inv;
    if (a.o) a.o[row * a.o_stride + h * D + d] = o;
    if (a.o16) reinterpret_cast<__nv_bfloat16*>(a.o16)[row * a.o_stride + h * D + d] = __float2bfloat16_rn(o);
  }
}

}  // namespace

// splits_of is not monotone in the length (1,024 positions make 32 splits of 32, 1,040 make 17 of 64), so
// the bound is min(kMaxSplits, tiles): it covers every length up to max_len, which a buffer sized for a
// table's capacity must while the table's stride moves below it.
int64_t paged_attention_workspace_floats(int64_t n, int64_t H, int64_t D, int64_t max_len) {
  return n * H * std::min<int64_t>(kMaxSplits, std::max<int64_t>(1, (max_len + kTile - 1) / kTile)) * (D + 2);
}

void paged_attention_fwd(const PagedAttnDeviceArgs& a, cudaStream_t st) {
  TEMPER_CHECK(a.D > 0 && a.D <= 32 * kMaxDPerLane) << "CUDA paged attention: head dim " << a.D << " outside [1, 256]";
  TEMPER_CHECK(a.Hkv > 0 && a.H % a.Hkv == 0) << "CUDA paged attention: heads " << a.H << " vs KV heads " << a.Hkv;
  TEMPER_CHECK(a.o || a.o16) << "CUDA paged attention: no output";
  kernels::attn_opts_check(a.opt, "CUDA paged_attention_fwd");
  if (a.n == 0) return;
  const float scale = kernels::attn_scale(a.opt, a.D), cap = a.opt.softcap;
  if (!split_fits(a)) {
    const size_t smem = sizeof(float) * (kTile * (a.D + 1) + a.D);
    dev::launch(paged_attn_kernel, dim3(static_cast<unsigned>(a.n), static_cast<unsigned>(a.H)), dim3(32), smem, st,
                "paged_attention_fwd", a, scale, cap);
    return;
  }
  const int64_t need = paged_attention_workspace_floats(a.n, a.H, a.D, a.max_len);
  TEMPER_CHECK(a.workspace_floats >= need) << "CUDA paged attention: workspace of " << a.workspace_floats << " floats, "
                                           << a.n << " rows of up to " << a.max_len << " positions need " << need;
  TEMPER_CHECK(a.n <= 65535) << "CUDA paged attention: " << a.n << " rows in one call (at most 65535)";
  // A row's positions: at most max_len, and at most the window (the splits cut [first, len)); fewer
  // positions make at most as many splits, so the workspace bound for max_len holds.
  const int64_t span = a.opt.window > 0 ? std::min(a.max_len, a.opt.window) : a.max_len;
  const int64_t split = split_len(span), nsplit = splits_of(span), G = a.H / a.Hkv;
  const size_t smem = sizeof(float) * (kTile * (a.D + 1) + kTile * a.D + G * a.D);
  dev::launch(paged_split_kernel,
              dim3(static_cast<unsigned>(nsplit), static_cast<unsigned>(a.Hkv), static_cast<unsigned>(a.n)),
              dim3(kSplitWarps * 32), smem, st, "paged_attention_split", a, scale, cap, split, nsplit, a.workspace);
  const unsigned threads = static_cast<unsigned>(std::min<int64_t>(256, (a.D + 31) / 32 * 32));
  dev::launch(paged_combine_kernel, dim3(static_cast<unsigned>(a.n), static_cast<unsigned>(a.H)), dim3(threads), 0, st,
              "paged_attention_combine", a, split, nsplit, static_cast<const float*>(a.workspace));
}

}  // namespace temper::cuda
