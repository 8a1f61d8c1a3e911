// The rollout's paged forward (Transformer::forward_paged): a step of prefill and decode rows of many sequences over
// the paged KV cache, its attention (the prompt runs on the training forward's tiles, every other row on the paged
// kernel) and the drafter's LM head.
#include <algorithm>
#include <cstring>
#include <limits>
#include <vector>

#include "temper/core/dtype.h"
#include "temper/core/error.h"
#include "temper/core/profile.h"
#include "temper/kernels/attention.h"
#include "temper/kernels/int4_matmul.h"
#include "temper/kernels/matmul.h"
#include "temper/kernels/paged_attention.h"
#include "temper/kernels/rmsnorm.h"
#include "temper/model/activation_store.h"
#include "temper/model/frozen_base.h"
#include "temper/model/int4_drafter.h"
#include "temper/model/residual_rows.h"
#include "temper/model/transformer.h"

namespace temper {

// A paged step's attention (its K/V already in the pool): the prompt runs (PagedStep::prompt_runs) on the training
// forward's tiles over their own K/V rows, the values the cache holds; every other row (decode, a continuing
// sequence's new tokens, a recomputed sequence past its prompt) on the paged kernel, in ranges between the runs.
void Transformer::attend_paged(int64_t l, const LayerActs& a, const PagedStep& paged, const KvPool& pool,
                               const kernels::AttnOpts& opt) {
  const int64_t N = paged.n, D = cfg_.head_dim, H = cfg_.num_heads, Hkv = cfg_.num_kv_heads, Hq = H * D, Hk = Hkv * D,
                QKV = cfg_.qkv_dim();
  if (paged.n_prompt_runs > 0) {
    if (static_cast<int64_t>(prompt_lse_.size()) < H * N) prompt_lse_.resize(static_cast<size_t>(H * N));
    const kernels::PackedAttnShape s{N, H, Hkv, D, QKV, QKV, Hq, paged.prompt_runs, paged.n_prompt_runs, opt};
    kernels::attention_fwd_packed(s, a.qkv, a.qkv + Hq, a.qkv + Hq + Hk, a.o, prompt_lse_.data());
    for (int64_t r = 0; a.lse && r < paged.n_prompt_runs; ++r)  // lse [H, N] -> the paged rows' [N, H]
      for (int64_t n = paged.prompt_runs[r].start; n < paged.prompt_runs[r].start + paged.prompt_runs[r].len; ++n)
        for (int64_t h = 0; h < H; ++h) a.lse[n * H + h] = prompt_lse_[static_cast<size_t>(h * N + n)];
  }
  kernels::PagedAttnArgs pa;
  pa.H = H;
  pa.Hkv = Hkv;
  pa.D = D;
  pa.q_stride = QKV;
  pa.o_stride = Hq;
  pool.point(pa, l);
  pa.opt = opt;
  auto rows = [&](int64_t b, int64_t e) {  // rows [b, e) on the paged kernel
    if (b >= e) return;
    pa.n = e - b;
    pa.q = a.qkv + b * QKV;
    pa.o = a.o + b * Hq;
    pa.block_tables = paged.tables + b;
    pa.kv_len = kv_len_.data() + b;
    pa.lse = a.lse ? a.lse + b * H : nullptr;  // [N, H]: what a kept row's backward reads
    kernels::paged_attention_fwd(pa);
  };
  int64_t from = 0;
  for (int64_t r = 0; r < paged.n_prompt_runs; ++r) {
    rows(from, paged.prompt_runs[r].start);
    from = paged.prompt_runs[r].start + paged.prompt_runs[r].len;
  }
  rows(from, N);
}

namespace {

// PagedStep::prompt_runs in order, apart, inside the step, each a sequence's positions 0, 1, ... on one block table.
void check_prompt_runs(const PagedStep& st) {
  TEMPER_CHECK(st.n_prompt_runs == 0 || st.prompt_runs)
      << "forward_paged: " << st.n_prompt_runs << " prompt runs, none given";
  int64_t end = 0;
  for (int64_t r = 0; r < st.n_prompt_runs; ++r) {
    const kernels::AttnSegment& g = st.prompt_runs[r];
    TEMPER_CHECK(g.start >= end && g.len > 0 && g.start + g.len <= st.n && g.prefix_len == 0)
        << "forward_paged: prompt run " << r << " (rows " << g.start << "+" << g.len << ", prefix " << g.prefix_len
        << ") overlaps the one before, is empty or lies past the step's " << st.n << " rows";
    for (int64_t i = g.start; i < g.start + g.len; ++i)
      TEMPER_CHECK(st.pos[i] == i - g.start && st.tables[i] == st.tables[g.start])
          << "forward_paged: prompt run " << r << ": row " << i << " is not its sequence's position " << i - g.start;
    end = g.start + g.len;
  }
}

}  // namespace

void Transformer::forward_paged(const PagedStep& st, KvPool& pool, const Int4Drafter* drafter) {
  TEMPER_CHECK(st.n > 0 && st.tokens && st.pos && st.tables) << "forward_paged: empty step";
  TEMPER_CHECK(pool.row() == cfg_.num_kv_heads * cfg_.head_dim) << "forward_paged: KV pool built for another model";
  TEMPER_CHECK(pool.dtype() == DType::f32 || precision_ == kernels::Precision::bf16)
      << "forward_paged: a bf16 KV cache holds the K/V of a model in bf16 precision; this one is f32 (use an f32 pool)";
  if (device_) return drafter ? device_->forward_paged_draft(st, pool, *drafter) : device_->forward_paged(st, pool);
  pool.clear_block_copies();  // the host pool copied them itself
  prepare(st.n, 1);           // n tokens of many sequences (positions come from the step), not one sequence of n
  refresh_f32_packed();
  if (static_cast<int64_t>(kv_len_.size()) < st.n) kv_len_.resize(static_cast<size_t>(st.n));
  int64_t max_len = 0;
  for (int64_t i = 0; i < st.n; ++i) {
    TEMPER_CHECK(st.pos[i] >= 0 && st.pos[i] < cfg_.max_position_embeddings)
        << "forward_paged: position " << st.pos[i] << " outside [0, " << cfg_.max_position_embeddings << ")";
    pos_[i] = st.pos[i];
    kv_len_[static_cast<size_t>(i)] = st.pos[i] + 1;
    max_len = std::max<int64_t>(max_len, st.pos[i] + 1);
  }
  check_prompt_runs(st);
  select_rope(max_len);
  const int64_t C = cfg_.hidden_size, V = cfg_.vocab_size;
  TEMPER_CHECK(!drafter || !base_) << "forward_paged: the drafter quantises f32 weights; this base is held as "
                                   << lora_base_name(base_->format());
  TEMPER_CHECK(!drafter || static_cast<int64_t>(drafter->layers().size()) == cfg_.num_layers)
      << "forward_paged: the drafter was built for another model (" << drafter->layers().size() << " layers)";
  const bool keep = st.store && st.save_slots && !drafter;
  TEMPER_CHECK(!keep || st.store->field_widths() == act_field_widths())
      << "forward_paged: the activation store was sized for another model";
  // Rows kept in consecutive slots (the engine's usual step) are computed in the store itself.
  bool direct = keep && st.save_slots[0] >= 0;
  for (int64_t i = 1; direct && i < st.n; ++i) direct = st.save_slots[i] == st.save_slots[0] + i;
  const int64_t s0 = direct ? st.save_slots[0] : 0;
  TEMPER_CHECK(!direct || s0 + st.n <= st.store->size()) << "forward_paged: activation slots past the store's";
  LayerActs a = direct ? store_view(*st.store, 0, s0) : scratch_acts_;
  embed(st.tokens, st.n, a.x_in);
  for (int64_t l = 0; l < cfg_.num_layers; ++l) {
    LayerActs next = direct ? store_view(*st.store, l + 1, s0) : scratch_acts_;
    layer_forward(l, a, direct ? next.x_in : x_tmp_, 1, st.n, &st, &pool,
                  drafter ? &drafter->layers()[static_cast<size_t>(l)] : nullptr);
    if (!direct) {
      if (keep) store_rows(l, st);
      copy_rows(scratch_acts_.x_in, x_tmp_, st.n, C);
    }
    a = next;
  }
  if (keep && !direct) store_rows(cfg_.num_layers, st);  // the final residual
  const float* x_last = a.x_in;
  for (int64_t r = 0; r < st.n_out; ++r) {  // only the rows whose next token is wanted
    TEMPER_CHECK(st.out_rows[r] >= 0 && st.out_rows[r] < st.n) << "forward_paged: output row " << st.out_rows[r];
    std::memcpy(x_tmp_ + r * C, x_last + st.out_rows[r] * C, static_cast<size_t>(C) * sizeof(float));
  }
  if (st.n_out == 0) return;
  kernels::rmsnorm_fwd(x_tmp_, nw(layout_.final_norm), xn_, rstd_f_, st.n_out, C,
                       static_cast<float>(cfg_.rms_norm_eps));
  if (drafter && drafter->head() != DraftHead::f32) {
    draft_head(st, *drafter);
    return;
  }
  TEMPER_PROFILE("lm_head");
  if (const uint16_t* p = wp(layout_.lm_head))
    kernels::gemm_bf16_packed(st.n_out, V, C, xn_, C, p, 0.f, st.logits, V);
  else if (const float* pf = wpf(layout_.lm_head))
    kernels::gemm_f32_packed(st.n_out, V, C, xn_, C, pf, 0.f, st.logits, V);
  else
    kernels::gemm_decode(st.n_out, V, C, xn_, C, params() + layout_.lm_head, C, 0.f, st.logits, V, precision_,
                         w16(layout_.lm_head));
  kernels::softcap_rows(st.logits, st.n_out * V, static_cast<float>(cfg_.final_softcap));
}

// The drafter's LM head over the normalised output rows (xn_): int4 or bf16, over every token or over its
// vocabulary subset (rows scattered into the full logits, -inf elsewhere: the drafter never proposes those).
void Transformer::draft_head(const PagedStep& st, const Int4Drafter& drafter) {
  const int64_t C = cfg_.hidden_size, V = cfg_.vocab_size;
  const std::vector<int32_t>& ids = drafter.vocab_ids();
  const int64_t N = ids.empty() ? V : static_cast<int64_t>(ids.size());
  float* out = st.logits;
  if (!ids.empty()) {
    draft_logits_.resize(static_cast<size_t>(st.n_out * N));
    out = draft_logits_.data();
  }
  if (const kernels::Int4Weights* head = drafter.head_int4()) {
    kernels::int4_gemm(st.n_out, xn_, C, *head, false, out, N);
  } else if (drafter.head_bf16_packed()) {
    kernels::gemm_bf16_packed(st.n_out, N, C, xn_, C, drafter.head_bf16(), 0.f, out, N);
  } else {  // the bf16 weights are read (the f32 pointer is not, with bf16 precision and a bf16 copy)
    kernels::gemm_decode(st.n_out, N, C, xn_, C, params() + layout_.lm_head, C, 0.f, out, N, kernels::Precision::bf16,
                         drafter.head_bf16());
  }
  kernels::softcap_rows(out, st.n_out * N, static_cast<float>(cfg_.final_softcap));  // before the -inf fill
  if (ids.empty()) return;
  for (int64_t r = 0; r < st.n_out; ++r) {
    float* row = st.logits + r * V;
    std::fill(row, row + V, -std::numeric_limits<float>::infinity());
    const float* z = out + r * N;
    for (int64_t k = 0; k < N; ++k) row[ids[static_cast<size_t>(k)]] = z[k];
  }
}

}  // namespace temper
