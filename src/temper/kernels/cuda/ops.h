// The small CUDA ops of the Llama/Qwen block and the optimizer, the device twins of kernels/
// {rmsnorm,rope,swiglu,embedding,adamw}.h with the same formulas and layouts (row-major, PyTorch
// order). Pointers are device memory; bf16 tensors travel as uint16_t bits. Every op runs on the
// given stream and never allocates. Reductions use a fixed order (deterministic for a given shape).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace temper::cuda {

// Conversions (round to nearest even, as kernels' bf16 on the CPU).
void f32_to_bf16(const float* x, uint16_t* y, int64_t n, cudaStream_t s);
void bf16_to_f32(const uint16_t* x, float* y, int64_t n, cudaStream_t s);
// x[r * ld + c] rounded to bf16 in place (kept as f32), r < rows, c < cols: the model's K and V (the
// CPU model's bf16 precision rounds them the same way; its bf16 KV cache holds them).
void round_bf16_rows(float* x, int64_t rows, int64_t cols, int64_t ld, cudaStream_t s);

// RMSNorm over the last dim C: y = x * rstd * w, rstd = 1 / sqrt(mean(x^2) + eps); rstd [N] saved.
void rmsnorm_fwd(const float* x, const float* w, float* y, float* rstd, int64_t N, int64_t C, float eps,
                 cudaStream_t s);
void rmsnorm_fwd(const float* x, const float* w, uint16_t* y, float* rstd, int64_t N, int64_t C, float eps,
                 cudaStream_t s);  // bf16 output (the next GEMM's input)
void rmsnorm_fwd(const uint16_t* x, const float* w, uint16_t* y, float* rstd, int64_t N, int64_t C, float eps,
                 cudaStream_t s);
// dx [N, C] overwritten (or added to); dw [C] accumulated (+=) by a deterministic column reduction
// (workspace: column_workspace(N, C) floats).
void rmsnorm_bwd(const float* dy, const float* x, const float* w, const float* rstd, float* dx, float* dw, int64_t N,
                 int64_t C, bool accumulate_dx, float* workspace, cudaStream_t s);

// RoPE (HF rotate-half) in place on rows of H heads of D (row_stride floats apart) at positions pos[r].
// cos/sin: the RopeTable's [max_pos, D/2] arrays copied to the device.
void rope_fwd(float* x, const int32_t* pos, const float* cos, const float* sin, int64_t rows, int64_t H, int64_t D,
              int64_t row_stride, cudaStream_t s);
void rope_fwd(uint16_t* x, const int32_t* pos, const float* cos, const float* sin, int64_t rows, int64_t H, int64_t D,
              int64_t row_stride, cudaStream_t s);
void rope_bwd(float* dx, const int32_t* pos, const float* cos, const float* sin, int64_t rows, int64_t H, int64_t D,
              int64_t row_stride, cudaStream_t s);
// The paged forward's one pass over a [n, ld] row of q | k | v (H, Hkv, Hkv heads of D): rope_fwd on
// q and k, k and v rounded to bf16 values (in place) and written to position pos[r] of the row's
// sequence in the paged pools, as kv_write. Equals rope_fwd x 2 + round_bf16_rows + kv_write.
void rope_kv_write(float* qkv, int64_t ld, const int32_t* pos, const float* cos, const float* sin, int64_t n, int64_t H,
                   int64_t Hkv, int64_t D, const int32_t* tables, int64_t table_stride, int64_t block_size,
                   float* k_pool, float* v_pool, cudaStream_t s);

// SwiGLU: gu [N, 2F] (gate | up) -> h [N, F] = silu(gate) * up; backward writes dgu [N, 2F].
void swiglu_fwd(const float* gu, float* h, int64_t N, int64_t F, cudaStream_t s);
void swiglu_fwd(const float* gu, uint16_t* h, int64_t N, int64_t F, cudaStream_t s);  // bf16 output
void swiglu_fwd(const uint16_t* gu, uint16_t* h, int64_t N, int64_t F, cudaStream_t s);
void swiglu_bwd(const float* gu, const float* dh, float* dgu, int64_t N, int64_t F, cudaStream_t s);

// GeGLU (Gemma): gu [N, 2F] (gate | up) -> h [N, F] = gelu_tanh(gate) * up; backward writes dgu [N, 2F].
void geglu_fwd(const float* gu, float* h, int64_t N, int64_t F, cudaStream_t s);
void geglu_fwd(const float* gu, uint16_t* h, int64_t N, int64_t F, cudaStream_t s);  // bf16 output
void geglu_fwd(const uint16_t* gu, uint16_t* h, int64_t N, int64_t F, cudaStream_t s);
void geglu_bwd(const float* gu, const float* dh, float* dgu, int64_t N, int64_t F, cudaStream_t s);

// Embedding: out[n] = table[ids[n]] (table [V, C]); ids outside [0, V) set *bad_id (device int, may be
// null) to 1 and write zeros. Backward: dtable[ids[n]] += dout[n], tokens walked in order per channel
// (the CPU kernel's order: the same bits for repeated ids).
void embedding_fwd(const float* table, const int32_t* ids, float* out, int64_t N, int64_t V, int64_t C, int* bad_id,
                   cudaStream_t s);
void embedding_fwd(const float* table, const int32_t* ids, uint16_t* out, int64_t N, int64_t V, int64_t C, int* bad_id,
                   cudaStream_t s);
void embedding_bwd(const float* dout, const int32_t* ids, float* dtable, int64_t N, int64_t C, cudaStream_t s);

// Column reductions over rows (bias and norm-weight gradients) in two deterministic passes: rows in
// chunks of kColumnChunk, a partial per (chunk, column), then the partials in chunk order. Parallel
// over chunks x columns; the same bits for a given shape. Workspace: column_workspace(N, C) floats.
inline constexpr int64_t kColumnChunk = 128;
inline int64_t column_workspace(int64_t N, int64_t C) { return ((N + kColumnChunk - 1) / kColumnChunk) * C; }
// out[c] += sum_k partial[k * C + c], k in order (the second pass of every column reduction).
void add_partials(const float* partial, int64_t chunks, int64_t C, float* out, cudaStream_t s);
// Bias gradient: out[c] += sum_n x[n * ld + c].
void column_sum_add(const float* x, int64_t N, int64_t C, int64_t ld, float* out, float* workspace, cudaStream_t s);
// dst[i] = src[rows[i] * ld_src + c] for c < C (dst rows C apart): the rows whose logits are wanted.
void gather_rows(const float* src, int64_t ld_src, const int64_t* rows, int64_t n, int64_t C, float* dst,
                 cudaStream_t s);
void gather_rows(const uint16_t* src, int64_t ld_src, const int64_t* rows, int64_t n, int64_t C, uint16_t* dst,
                 cudaStream_t s);
// out [n, V] = fill, then out[i * V + ids[k]] = z[i * N + k] for k < N (ids distinct, in [0, V)): the logits of a
// vocabulary subset (the drafter's head over N tokens) as whole rows, fill (-inf) for the tokens outside it.
void scatter_columns(const float* z, int64_t n, int64_t N, const int32_t* ids, int64_t V, float fill, float* out,
                     cudaStream_t s);
// Paged KV cache write: row i's K and V (Hkv * D floats at k + i * ld, v + i * ld) go to position
// pos[i] of its sequence: block tables[i * table_stride + pos / block_size], slot pos % block_size.
void kv_write(const float* k, const float* v, int64_t ld, const int32_t* pos, const int32_t* tables,
              int64_t table_stride, int64_t n, int64_t row_floats, int64_t block_size, float* k_pool, float* v_pool,
              cudaStream_t s);
// After a decode step on the device: every row's next input is the token it just drew, one position on.
void decode_advance(const int32_t* drawn, int32_t* tokens, int32_t* pos, int32_t* kv_len, int64_t n, cudaStream_t s);

// AdamW (torch.optim.AdamW) on fp32 master weights p with moments m, v; when p_bf16 is given the
// updated weights are also written rounded to bf16 (the compute copy). step counts from 1. The
// update uses g * grad_scale (clipping without a pass over g; g itself is left as it is).
void adamw_step(float* p, const float* g, float* m, float* v, int64_t n, float lr, float beta1, float beta2, float eps,
                float weight_decay, int64_t step, uint16_t* p_bf16, cudaStream_t s, float grad_scale = 1.f);
// Sum of squares of g in fixed blocks, then the blocks in a fixed order (double); workspace:
// grad_norm_workspace(n) doubles.
int64_t grad_norm_workspace(int64_t n);
void grad_sumsq(const float* g, int64_t n, double* workspace, double* out, cudaStream_t s);  // out: device double

// model_ops.cu: the other decoder families' ops (issue 36; Qwen3, Gemma-2/3).
// Per-head RMSNorm (kernels/rmsnorm.h's rmsnorm_heads_*): token n's H heads of D at x + n * stride; rstd [N, H];
// y may alias x. Backward: dw [D] accumulated (column workspace: column_workspace(N, D) floats), dx overwritten
// (may alias dy).
void rmsnorm_heads_fwd(const float* x, const float* w, float* y, float* rstd, int64_t N, int64_t H, int64_t D,
                       int64_t stride, float eps, cudaStream_t s);
void rmsnorm_heads_bwd(const float* dy, const float* x, const float* w, const float* rstd, float* dx, float* dw,
                       int64_t N, int64_t H, int64_t D, int64_t stride, float* workspace, cudaStream_t s);
// y [N, C] = res + rmsnorm(x) * w, rstd [N] of x saved (Gemma's norm of a block's output, then the residual add;
// the backward is rmsnorm_bwd's). y must not alias x.
void rmsnorm_residual_fwd(const float* x, const float* w, const float* res, float* y, float* rstd, int64_t N, int64_t C,
                          float eps, cudaStream_t s);
// y[i] = x[i] + a (Gemma's (1 + w) norm weights); x[i] *= a (the embedding times sqrt(C)).
void add_scalar(const float* x, float a, float* y, int64_t n, cudaStream_t s);
void scale(float* x, float a, int64_t n, cudaStream_t s);
// The embedding lookup's gradient before embedding_bwd: dx [N, C] times scale, rows whose id is pad_id zeroed
// (pad_id < 0: none).
void embedding_grad_prep(float* dx, const int32_t* ids, int64_t N, int64_t C, float scale, int32_t pad_id,
                         cudaStream_t s);

}  // namespace temper::cuda
