// The table of per-ISA CPU kernels. The same source (isa_kernels.inc) is compiled once per ISA
// (scalar, AVX2+FMA, AVX-512) into its own namespace, Highway-style; isa_table() returns the table
// of the ISA chosen at run time (core/cpu_features.h). Each entry works on a range the caller
// gives (the caller parallelises), so results never depend on the thread count.
#pragma once

#include <cstdint>

#include "temper/core/cpu_features.h"

namespace temper::kernels {

// attn_mm_*'s triangle: row m of a causal block sees columns n <= m + c. kAttnTriCols: row tile [m0, m0 + R)
// writes columns below m0 + R + c only (the others are left as they were); kAttnTriKEnd: sums k < m0 + R + c only
// (A is zero beyond); kAttnTriKStart: sums k >= m0 - c only (A's rows are keys, its k queries; zero before).
inline constexpr int kAttnTriNone = 0, kAttnTriCols = 1, kAttnTriKEnd = 2, kAttnTriKStart = 3;

// Cache lines a paged attention kernel brings into L1 while it works (the next KV block's): `lines` lines of K from k
// and as many of V from v, spread over its keys (a burst of them at once holds the miss buffers the block's own loads
// need).
struct PrefetchSpan {
  const char* k = nullptr;
  const char* v = nullptr;
  int64_t lines = 0;
};

struct IsaTable {
  Isa isa;
  // y[r] = x[r] * rstd[r] * w ; rstd[r] = 1/sqrt(mean(x[r]^2) + eps), rows [0, rows) of width C.
  void (*rmsnorm_fwd)(const float* x, const float* w, float* y, float* rstd, int64_t rows, int64_t C, float eps);
  // dx[r] (+)= ... ; dw_acc += sum over these rows (caller gives one dw_acc per fixed row block).
  void (*rmsnorm_bwd)(const float* dy, const float* x, const float* w, const float* rstd, float* dx, float* dw_acc,
                      int64_t rows, int64_t C, bool accumulate_dx);
  // Rotate-half RoPE on rows of H heads x D, row r at position pos[r]; cos/sin tables [P, D/2].
  // inverse = true applies the transpose (the backward).
  void (*rope)(float* x, const int32_t* pos, const float* cos, const float* sin, int64_t rows, int64_t H, int64_t D,
               int64_t row_stride, bool inverse);
  void (*swiglu_fwd)(const float* gate, const float* up, float* h, int64_t n);
  void (*swiglu_bwd)(const float* gate, const float* up, const float* dh, float* dgate, float* dup, int64_t n);
  // GeGLU: h = gelu_tanh(gate) * up (torch's approximate='tanh' op order; tanh to ~2 ulp).
  void (*geglu_fwd)(const float* gate, const float* up, float* h, int64_t n);
  void (*geglu_bwd)(const float* gate, const float* up, const float* dh, float* dgate, float* dup, int64_t n);
  // Logit soft-capping z = tanh(z / cap) * cap in place (HF Gemma2's op order); every element takes the same
  // code path, so a logit's bits do not depend on its index. Backward: dz *= 1 - (zc / cap)^2, zc the capped z.
  void (*logit_softcap)(float* z, int64_t n, float cap);
  void (*logit_softcap_bwd)(float* dz, const float* zc, int64_t n, float cap);
  // Decoupled AdamW on [0, n) (PyTorch torch.optim.AdamW semantics).
  void (*adamw)(float* p, const float* g, float* m, float* v, int64_t n, float lr, float beta1, float beta2, float eps,
                float weight_decay, float bias_corr1, float bias_corr2);
  double (*sumsq)(const float* x, int64_t n);
  void (*scale)(float* x, int64_t n, float s);
  // Row softmax statistics: returns m = max; sum_exp = sum exp(x - m); sum_exp_xm = sum exp(x - m) * (x - m).
  // Entropy = log(sum_exp) - sum_exp_xm / sum_exp (no cancellation against m).
  float (*row_softmax_stats)(const float* x, int64_t n, float* sum_exp, float* sum_exp_xm);
  // x[i] = exp(x[i] * scale - shift) in place; returns the sum.
  float (*exp_shift_inplace)(float* x, int64_t n, float scale, float shift);
  // A sampling distribution's weights e[i] = exp((z[i] - mx) * inv_t) (0 where z[i] is not finite) and
  // their sums over blocks of 16 (block[b] = e[16b] + ... in order; the last block may be shorter).
  void (*tempered_weights)(const float* z, int64_t n, float mx, float inv_t, float* e, float* block);
  // Fused classifier gradient for one row: dz = g_lp * (onehot(target) - p) + g_ent * (-p * (log p + H)),
  // p = exp(z - lse), written over z.
  void (*classifier_row_grad)(float* z, int64_t V, int32_t target, float lse, float entropy, float g_lp, float g_ent);
  // Attention backward row: dS[i] = P[i] * (dP[i] - d) * scale, in place over dP; P given.
  void (*softmax_bwd_row)(const float* P, float* dP, int64_t n, float d, float scale);
  // Attention logit soft-capping (Gemma-2): x[i] = cap * tanh(x[i] * scale / cap) in place; dcap (optional)
  // gets the derivative's factor 1 - tanh^2.
  void (*softcap)(float* x, int64_t n, float scale, float cap, float* dcap);
  float (*dot)(const float* a, const float* b, int64_t n);
  void (*f32_to_bf16)(const float* x, uint16_t* y, int64_t n);
  // Small-M GEMM (decode): C[m, n] (+)= sum_k A[m, k] W[n, k] for m < M, n in [n0, n1); W row-major
  // [N, K] with row stride ldw (f32; the model's packed products are cpu/gemm_packed.h's).
  void (*gemm_nt_f32)(const float* A, int64_t lda, const float* W, int64_t ldw, float* C, int64_t ldc, int64_t M,
                      int64_t n0, int64_t n1, int64_t K, bool accumulate);
  // Paged decode attention: one query row over nb keys/values of one KV block, online softmax (scores:
  // scratch of round_up(nb, 16) floats). cap > 0: scores soft-capped (softcap above) after scaling.
  void (*attn_block_update)(const float* q, const float* K, const float* V, int64_t stride, int64_t nb, int64_t D,
                            float scale, float cap, float* scores, float* m, float* l, float* acc);
  // Paged decode attention of the G query heads sharing one KV head over one block (q, acc: the heads'
  // rows, D apart; m, l: theirs; scores: scratch of G * round_up(nb, 16) floats; widened as above; pf: lines to
  // prefetch meanwhile).
  void (*attn_group_update)(const float* q, int64_t G, const float* K, const float* V, int64_t stride, int64_t nb,
                            int64_t D, float scale, float cap, float* scores, float* m, float* l, float* acc,
                            PrefetchSpan pf);
  // bf16 rows; widened: scratch of 2 * nb * D floats or nullptr.
  void (*attn_group_update_bf16)(const float* q, int64_t G, const uint16_t* K, const uint16_t* V, int64_t stride,
                                 int64_t nb, int64_t D, float scale, float cap, float* scores, float* m, float* l,
                                 float* acc, float* widened, PrefetchSpan pf);
  // The training attention's tile products (kernels/attention.cpp; attention_tiles.inc): C[m, n] (+)= sum_k
  // A(m, k) B[k * ldb + n] for m < M, n < N, k < K, A(m, k) at A[m * ars + k * aks]; each output sums from
  // zero in k order, then is written or (accumulate) added. tri (kAttnTri*) skips what a causal block's mask zeroes.
  void (*attn_mm_f32)(const float* A, int64_t ars, int64_t aks, const float* B, int64_t ldb, float* C, int64_t ldc,
                      int64_t M, int64_t N, int64_t K, bool accumulate, int tri, int64_t c);
  // The same on bf16 pairs with f32 sums: 32-bit words holding (element 2p, element 2p + 1) of a row of k. A(m, p) =
  // A[m * ars + p * aps], B row p = B[p * ldb + n] (its low half at k = 2p), Kp pairs; tri counted in elements,
  // widened to whole pairs. AVX512-BF16 dot products where the CPU has them (attention_dpbf16.cpp), else plain
  // loops with the same bits (short of VDPBF16PS's flushing of denormals).
  void (*attn_mm_bf16)(const uint32_t* A, int64_t ars, int64_t aps, const uint32_t* B, int64_t ldb, float* C,
                       int64_t ldc, int64_t M, int64_t N, int64_t Kp, bool accumulate, int tri, int64_t c);
  // out[i] = bf16(a[i]) | bf16(b[i]) << 16 (b null: zero), round to nearest even: two rows as attn_mm_bf16's pairs.
  // Where attn_mm_bf16 is VDPBF16PS, this and attn_bf16_row round on VCVTNE2PS2BF16 (the same bits but for denormal
  // inputs, flushed to zero, which VDPBF16PS would read as zero anyway).
  void (*attn_bf16_pairs)(const float* a, const float* b, uint32_t* out, int64_t n);
  // One row's pairs along it: out[p] = bf16(x[2p - off]) | bf16(x[2p + 1 - off]) << 16 for p < (n + off + 1) / 2,
  // zero outside x[0, n) (off 0 or 1: 1 lines the pairs up with an operand whose pairs start one element earlier).
  void (*attn_bf16_row)(const float* x, int64_t n, int64_t off, uint32_t* out);
  // The bf16 backward's dS for one or two query rows (rows), straight into the three bf16 operands that follow it:
  // row i (P + i * ld, dP + i * ld, W columns) sees columns [lo[i], hi[i]). With L, P holds the row's scores s first
  // and gets P = exp(s * es - L[i]) there (isa_kernels.inc's exp_f polynomial); without, P is given (and 0 outside).
  // d_i = sum of P * dP over them (16 lanes folded as a tree) and dS = P * (dP - d_i) * scale (* G, the cap's
  // factor, where G is given), 0 elsewhere. Out: ds_rows, each row's dS as attn_bf16_row with off (rows ldr words
  // apart); ds_pairs and p_pairs, dS's and P's two rows as attn_bf16_pairs (W words; the second row zero where rows
  // is 1).
  void (*attn_dscores_bf16)(float* P, const float* L, float es, const float* dP, const float* G, int64_t ld,
                            int64_t rows, const int64_t* lo, const int64_t* hi, float scale, int64_t W, int64_t off,
                            uint32_t* ds_rows, int64_t ldr, uint32_t* ds_pairs, uint32_t* p_pairs);
  // The training forward's softmax numerators for one row of n >= 1 scores, in place: x[j] = exp(x[j] * scale -
  // shift) with shift = max(x) * scale (isa_kernels.inc's exp_f polynomial); returns their sum (16 lanes folded as a
  // tree) and shift. The row's P is x / sum, its lse shift + log(sum).
  float (*attn_exp_row)(float* x, int64_t n, float scale, float* shift);
  // out[c * ldo + r] = x[r * ldx + c] for r < rows, c < cols (the keys as the columns of Q K^T's right operand).
  void (*attn_transpose)(const float* x, int64_t ldx, int64_t rows, int64_t cols, float* out, int64_t ldo);
  // What the attention entries above run on, set where they are chosen (kernels::attention_kernel_name prints
  // them): attn_kernel "tiles avx512" (register tiles) or "loops avx2" / "loops scalar" (attention_tiles.inc);
  // attn_bf16_kernel, the bf16 products and their rounding: "vdpbf16ps" (attention_dpbf16.cpp) or attn_kernel's.
  const char* attn_kernel;
  const char* attn_bf16_kernel;
  // int4 weights x int8 activations (kernels/int4_matmul.h), outputs n in [n0, n1) of every row m < M:
  // Y[m, n] (+)= sum_g scale[n, g] * (sa[m, g] * dot(q[n, g], qa[m, g]) - zero[n, g] * zs[m, g]).
  void (*int4_gemm_rows)(const int8_t* qa, const float* sa, const float* zs, int64_t M, int64_t Kp, const uint8_t* q,
                         const float* scale, const uint8_t* zero, int64_t group, int64_t n0, int64_t n1, float* Y,
                         int64_t ldy, bool accumulate);
  // A held weight's decode products (kernels/held_gemv.h; cpu/held_gemv.inc). Rows [r0, r1) of an int4 weight in
  // the rows layout (q [N, Kp / 2], scale and zero [N, Kp / group]) as f32 rows of ldo, the values
  // int4_rows_to_f32 gives (kernels/weight_panel.h), the padding past K dropped.
  void (*held_int4_f32)(const uint8_t* q, const float* scale, const uint8_t* zero, int64_t K, int64_t Kp, int64_t group,
                        int64_t r0, int64_t r1, float* out, int64_t ldo);
  // The same rounded to bf16 as f32_to_bf16 rounds (nearest even): the values kernels::gemm's bf16 path multiplies.
  void (*held_int4_bf16)(const uint8_t* q, const float* scale, const uint8_t* zero, int64_t K, int64_t Kp,
                         int64_t group, int64_t r0, int64_t r1, uint16_t* out, int64_t ldo);
  // Rows [r0, r1) of an nf4 weight (kernels/nf4.h: q [N, Kp / 2] packed as int4's rows, absmax [N, Kp / block]) as
  // f32 rows of ldo, level * absmax as nf4_rows_to_f32 gives them; and the same rounded to bf16 as f32_to_bf16 rounds.
  void (*held_nf4_f32)(const uint8_t* q, const float* absmax, int64_t K, int64_t Kp, int64_t block, int64_t r0,
                       int64_t r1, float* out, int64_t ldo);
  void (*held_nf4_bf16)(const uint8_t* q, const float* absmax, int64_t K, int64_t Kp, int64_t block, int64_t r0,
                        int64_t r1, uint16_t* out, int64_t ldo);
  // out[i] = w[i] widened to f32 (exact), i < n.
  void (*held_bf16_f32)(const uint16_t* w, int64_t n, float* out);
  // C[m, n] (+)= sum_k A[m, k] W[n, k] on bf16 rows (A [M, K] row stride lda, W row-major with row stride ldw) for
  // m < M, n in [n0, n1), f32 sums: 16 lanes of pairs in k order, folded in a fixed tree (held_gemv.inc); VDPBF16PS
  // where the CPU has AVX512-BF16, the same bits elsewhere (short of its flushing of denormals).
  void (*held_gemm_nt_bf16)(const uint16_t* A, int64_t lda, const uint16_t* W, int64_t ldw, float* C, int64_t ldc,
                            int64_t M, int64_t n0, int64_t n1, int64_t K, bool accumulate);
};

const IsaTable& isa_table();          // the active ISA's
const IsaTable& isa_table(Isa isa);   // a given ISA's (tests)

}  // namespace temper::kernels
