// Attention on the device. Training: causal grouped-query flash attention, forward saving the
// log-sum-exp of the scaled scores per query row and a backward that recomputes P from it (the
// layouts and AttnShape of kernels/attention.h; dq, dk, dv overwritten). Rollouts: attention of new
// query rows over the paged KV cache (kernels/paged_attention.h), block tables as one [n, max_blocks]
// int32 array. Both take the score options of kernels::AttnOpts (custom scale, soft-capping, sliding
// window; the paged kernel then never reads a block wholly before a row's window: its table entry may
// be -1). Leaves out: tensor-core (wgmma) tiles, bf16 inputs.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "temper/kernels/attention.h"

namespace temper::cuda {

// f32, one warp per query row (or key row in the dK/dV pass), K/V tiles of 32 rows in shared memory,
// online softmax; D up to 256; the paged kernel splits long contexts over blocks (paged_attention.cu).
// lse [B, H, T]
void attention_fwd(const kernels::AttnShape& s, const float* q, const float* k, const float* v, float* o, float* lse,
                   cudaStream_t st);
// delta: [B, H, T] scratch (rowsum(dO * O)). dkv_partial (optional, attention_bwd_workspace_floats(s)
// floats): with it the dK/dV pass runs a block per query head instead of per KV head and adds the
// group's heads in a second, ordered pass (the same sums; more parallel when H > Hkv).
int64_t attention_bwd_workspace_floats(const kernels::AttnShape& s);
void attention_bwd(const kernels::AttnShape& s, const float* q, const float* k, const float* v, const float* o,
                   const float* lse, const float* dout, float* dq, float* dk, float* dv, float* delta, cudaStream_t st,
                   float* dkv_partial = nullptr);

struct PagedAttnDeviceArgs {
  int64_t n = 0, H = 0, Hkv = 0, D = 0;
  const float* q = nullptr;  // [n, q_stride]
  int64_t q_stride = 0;
  float* o = nullptr;  // [n, o_stride]; may be null when o16 is set
  int64_t o_stride = 0;
  uint16_t* o16 = nullptr;  // optional [n, o_stride] bf16 copy of o (the next GEMM's input), rounded to nearest even
  const int32_t* block_tables = nullptr;  // [n, table_stride]: row i's sequence's blocks
  int64_t table_stride = 0;
  const int32_t* kv_len = nullptr;  // [n]
  const float* k_pool = nullptr;    // one layer: block b's rows at k_pool + b * block_size * Hkv * D
  const float* v_pool = nullptr;
  int64_t block_size = 0;
  // Split over positions (flash-decoding) when given: the most positions a row's table can address
  // (table_stride * block_size) and scratch of paged_attention_workspace_floats(n, H, D, max_len).
  int64_t max_len = 0;
  float* workspace = nullptr;
  int64_t workspace_floats = 0;
  kernels::AttnOpts opt{};  // row i sees positions (kv_len[i] - 1 - window, kv_len[i] - 1] with a window
};
int64_t paged_attention_workspace_floats(int64_t n, int64_t H, int64_t D, int64_t max_len);
// Graph-capturable: the launch shapes depend on n and max_len, not on the rows' lengths.
void paged_attention_fwd(const PagedAttnDeviceArgs& a, cudaStream_t st);

}  // namespace temper::cuda
