// The Transformer's activation arena (transformer.h): plan() sizes it once for the largest batch, bind_arena()
// carves every activation and scratch buffer out of it (or counts the bytes), and activation_bytes_for() counts
// the same sequence from a config alone, without a model (memory plans for models larger than this machine).
#include <algorithm>
#include <cstdint>

#include "temper/core/error.h"
#include "temper/kernels/classifier.h"
#include "temper/model/transformer.h"

namespace temper {

// Carves every activation and scratch buffer out of the arena (or, with allocate = false, counts
// the bytes the same sequence needs). One sequence for both: the plan cannot drift from the use.
void Transformer::bind_arena(bool allocate, size_t* bytes) {
  const int64_t N = max_tokens_, C = cfg_.hidden_size, QKV = cfg_.qkv_dim(), Hq = cfg_.num_heads * cfg_.head_dim,
                F = cfg_.intermediate_size, H = cfg_.num_heads, Hkv = cfg_.num_kv_heads;
  size_t total = 0;
  auto take = [&](int64_t n) -> float* {
    size_t b = (static_cast<size_t>(n) * sizeof(float) + 63) / 64 * 64;
    total += b;
    return allocate ? static_cast<float*>(arena_.alloc_bytes(static_cast<size_t>(n) * sizeof(float))) : nullptr;
  };
  auto take_layer = [&](LayerActs& a, bool x_only) {
    a.x_in = take(N * C);
    if (x_only) return;
    a.rstd1 = take(N);
    a.qkv_pre = cfg_.qk_norm ? take(N * QKV) : nullptr;
    a.q_rstd = cfg_.qk_norm ? take(N * H) : nullptr;
    a.k_rstd = cfg_.qk_norm ? take(N * Hkv) : nullptr;
    a.qkv = take(N * QKV);
    a.o = take(N * Hq);
    a.lse = take(N * H);
    a.x_mid = take(N * C);
    a.rstd2 = take(N);
    a.gu = take(N * 2 * F);
    a.ao = cfg_.sandwich_norm ? take(N * C) : nullptr;
    a.rstd3 = cfg_.sandwich_norm ? take(N) : nullptr;
    a.mo = cfg_.sandwich_norm ? take(N * C) : nullptr;
    a.rstd4 = cfg_.sandwich_norm ? take(N) : nullptr;
  };
  saved_.assign(static_cast<size_t>(cfg_.num_layers), LayerActs{});
  for (auto& a : saved_) take_layer(a, recompute_);
  take_layer(scratch_acts_, false);
  x_final_ = take(N * C);
  rstd_f_ = take(N);
  xn_ = take(N * C);
  h_ = take(N * F);
  dx_ = take(N * C);
  dxn_ = take(N * C);
  dqkv_ = take(N * QKV);
  do_ = take(N * Hq);
  dh_ = take(N * F);
  dgu_ = take(N * 2 * F);
  x_tmp_ = take(N * C);
  rstd_tmp_ = take(N);
  pos_ = reinterpret_cast<int32_t*>(take(N));
  classifier_ws_floats_ = kernels::classifier_workspace_floats(N, cfg_.vocab_size);
  classifier_ws_ = take(classifier_ws_floats_);
  *bytes = total;
}

// bind_arena's sequence of takes, counted only (test_memory_plan holds the two equal for every family's fields).
size_t Transformer::activation_bytes_for(const ModelConfig& cfg, int64_t max_tokens, int64_t max_seq, bool recompute) {
  (void)max_seq;  // the arena depends on the tokens only
  const int64_t N = max_tokens, C = cfg.hidden_size, QKV = cfg.qkv_dim(), Hq = cfg.num_heads * cfg.head_dim,
                F = cfg.intermediate_size, H = cfg.num_heads, Hkv = cfg.num_kv_heads;
  size_t total = 0;
  auto take = [&](int64_t n) { total += (static_cast<size_t>(n) * sizeof(float) + 63) / 64 * 64; };
  auto take_layer = [&](bool x_only) {
    take(N * C);
    if (x_only) return;
    take(N);
    if (cfg.qk_norm) take(N * QKV), take(N * H), take(N * Hkv);
    take(N * QKV);
    take(N * Hq);
    take(N * H);
    take(N * C);
    take(N);
    take(N * 2 * F);
    if (cfg.sandwich_norm) take(N * C), take(N), take(N * C), take(N);
  };
  for (int64_t l = 0; l < cfg.num_layers; ++l) take_layer(recompute);
  take_layer(false);
  for (int64_t n : {N * C, N, N * C, N * F, N * C, N * C, N * QKV, N * Hq, N * F, N * 2 * F, N * C, N, N}) take(n);
  take(kernels::classifier_workspace_floats(N, cfg.vocab_size));
  return total;
}

void Transformer::plan(int64_t max_tokens, int64_t max_seq) {
  TEMPER_CHECK(!holding_) << "plan: the held base planned by plan_held_base is not held yet (a load that did not "
                             "report every product): call hold_base before running the model";
  TEMPER_CHECK(max_tokens > 0 && max_seq > 0 && max_seq <= max_tokens)
      << "plan: need 0 < seq (" << max_seq << ") <= tokens (" << max_tokens << ")";
  TEMPER_CHECK(max_seq <= cfg_.max_position_embeddings)
      << "sequence length " << max_seq << " exceeds the model's max_position_embeddings "
      << cfg_.max_position_embeddings;
  rope_context_ = max_seq;
  if (device_) {  // the device holds the training activations; the host plans lazily for what it still runs
    device_->plan(max_tokens, max_seq);
    return;
  }
  plan_host(max_tokens, max_seq);
}

void Transformer::plan_host(int64_t max_tokens, int64_t max_seq) {
  max_tokens_ = max_tokens;
  max_seq_ = max_seq;
  size_t bytes = 0;
  bind_arena(false, &bytes);
  arena_.reserve(bytes);
  bind_arena(true, &bytes);
}

}  // namespace temper
