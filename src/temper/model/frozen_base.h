// The frozen base under LoRA adapters, held compactly: the decoder's block products (q/k/v, o, gate/up and down of
// every layer) only as bf16, int4 or nf4 (QLoRA). int4: the drafter's format, RTN asymmetric uint4, one f32 scale and
// uint4 zero per group of 128 inputs or the largest of 64 / 32 dividing the row (kernels/int4_matmul.h, in its rows
// layout on every CPU, so a base quantises to the same bytes everywhere). nf4: QLoRA's NormalFloat, one f32 absmax per
// 64 inputs (32 where 64 does not divide the row), bitsandbytes' levels (kernels/nf4.h). No f32 copy, no gradient. A
// product dequantises W a panel of rows at a time into f32 and multiplies with kernels::gemm (in the model's
// precision: bf16 rounds the panel again, exactly for a bf16 base), so the model computes what an f32 model holding
// the dequantised values computes: training, log-prob scoring and the paged rollout alike (the rollout = training
// log-prob invariant holds). Decode-shaped products (M <= kernels::held_gemv_max_rows()) take kernels/held_gemv.h
// instead: no panel, f32 with the bits of the small-M GEMM on the dequantised values, bf16 on bf16 pairs with f32 sums.
// Follows QLoRA (Dettmers et al., 2023), int4 as an alternative to its NF4; leaves out double quantisation (absmax in
// 8 bits), the drafter's int8-activation products (their rounding would break the invariant) and CUDA.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "temper/core/tensor.h"
#include "temper/kernels/int4_matmul.h"
#include "temper/kernels/matmul.h"
#include "temper/kernels/nf4.h"
#include "temper/model/config.h"
#include "temper/model/lora.h"
#include "temper/model/param_layout.h"

namespace temper {

class FrozenBase {
 public:
  // The int4 group asked for (int4_group_for picks 64 or 32 where 128 does not divide the row).
  static constexpr int64_t kInt4Group = 128;
  // Panels hold at most this many f32 values (2 MiB), at least 16 rows.
  static constexpr int64_t kPanelFloats = int64_t{1} << 19;

  // Takes the block products' values from `params` (the model's flat f32 buffer, laid out by `layout`) and holds
  // them as `format` (bf16, int4 or nf4). Deterministic: the same weights give the same bytes. panel_floats: the
  // panels' size (tests use small ones to cut every product into several).
  FrozenBase(const ModelConfig& cfg, const ParamLayout& layout, const float* params, LoraBase format,
             int64_t panel_floats = kPanelFloats);
  // Empty: the held weights' places, none taken yet (take() fills each; products need them all). A model loading
  // into a held base (Transformer::plan_held_base) takes each weight as soon as its values are loaded, never holding
  // the f32 model whole; the constructor above is this one and a take() of every weight.
  FrozenBase(const ModelConfig& cfg, const ParamLayout& layout, LoraBase format, int64_t panel_floats = kPanelFloats);

  LoraBase format() const { return format_; }
  // One held weight: W [N, K] (a product y = x W^T of N outputs and K inputs) at `offset` in the flat layout.
  struct Weight {
    int64_t offset = 0, N = 0, K = 0;
    size_t at16 = 0;          // bf16: its first element in the bf16 buffer
    kernels::Int4Weights q4;  // int4
    kernels::Nf4Weights nf4;  // nf4
  };
  const std::vector<Weight>& weights() const { return weights_; }  // by offset
  const Weight* find(int64_t offset) const;                        // null when no held weight starts there
  bool holds(int64_t offset) const { return find(offset) != nullptr; }
  // Whether a flat-layout entry [offset, offset + n) lies inside a held weight (q/k/v_proj inside the fused qkv).
  bool covers(int64_t offset, int64_t n) const;
  // The held weight whose range holds flat index `offset` (null: none).
  const Weight* containing(int64_t offset) const;

  // Holds the weight at `offset` from its values W [N, K] (row-major): bf16, int4 or nf4, the same bytes whenever and
  // in whatever order the weights are taken. Each weight once.
  void take(int64_t offset, const float* W);
  bool taken(int64_t offset) const;
  bool complete() const { return taken_count_ == weights_.size(); }  // every weight taken: the products may run

  // y[M, N] = x[M, K] W^T (+ y when beta = 1), the weight at `offset`; precision as kernels::gemm's. The products
  // only read the held values (each calling thread dequantises into its own panel), so several threads may run them
  // at once: models share one held base (Transformer::share_weights, the [rl.async] explorer's snapshot).
  void forward(int64_t offset, int64_t M, const float* x, int64_t ldx, float beta, float* y, int64_t ldy,
               kernels::Precision p) const;
  // The same through panels whatever M (forward takes them above kernels::held_gemv_max_rows() rows): tests, benches.
  void forward_panels(int64_t offset, int64_t M, const float* x, int64_t ldx, float beta, float* y, int64_t ldy,
                      kernels::Precision p) const;
  // dx[M, K] = dy[M, N] W (+ dx when beta = 1): the input's gradient through the frozen weight.
  void backward_input(int64_t offset, int64_t M, const float* dy, int64_t ldy, float beta, float* dx, int64_t ldx,
                      kernels::Precision p) const;
  // The values the products use, as f32: W [N, K] row-major (an f32 model holding these computes the same).
  void dequantize(int64_t offset, float* W) const;
  // Every held weight's values into a flat f32 buffer of the same layout (merging adapters into what was trained).
  void dequantize_into(float* params) const;
  // Zeroes every held weight's range of a flat buffer of the layout and gives its whole pages back to the system
  // (madvise MADV_DONTNEED: lazily zeroed again, no memory until written): the f32 values and gradients not kept.
  void release_in(float* flat) const;
  void release_in(float* flat, int64_t offset) const;  // the same for the one weight at `offset`

  size_t bytes() const;  // held: the bf16 values, int4 bytes with scales and zeros, nf4 bytes with absmax (no panel)
  // A 64-bit digest of the held bytes (bf16 values; int4 bytes, scales and zeros; nf4 bytes and absmax; weight by
  // weight): two bases with the same digest hold the same values (short of a collision). Ranks that each quantised
  // their own read of a file compare it (TrainRun::sync_weights). Every weight taken.
  uint64_t digest() const;
  // What bytes() is for a model of this config, computed without weights (the memory plan).
  static double bytes_for(const ModelConfig& cfg, LoraBase format);
  // The held weights' parameters (the block products'), for the memory plan.
  static int64_t params_for(const ModelConfig& cfg);

 private:
  const Weight& at(int64_t offset) const;
  const float* panel(const Weight& w, int64_t r0, int64_t r1) const;  // rows [r0, r1) as f32, the thread's panel
  void rows_to_f32(const Weight& w, int64_t r0, int64_t r1, float* out) const;  // rows [r0, r1) of W as f32
  int64_t panel_rows(const Weight& w) const;
  LoraBase format_;
  int64_t panel_floats_;
  std::vector<Weight> weights_;
  std::vector<char> taken_;  // by weight
  size_t taken_count_ = 0;
  Tensor bf16_;  // bf16: every held weight, one after another
};

}  // namespace temper
