#include "temper/model/transformer.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "temper/core/dtype.h"
#include "temper/core/error.h"
#include "temper/core/memory_info.h"
#include "temper/core/profile.h"
#include "temper/core/rng.h"
#include "temper/core/thread_pool.h"
#include "temper/kernels/attention.h"
#include "temper/kernels/bias.h"
#include "temper/kernels/embedding.h"
#include "temper/kernels/geglu.h"
#include "temper/kernels/int4_matmul.h"
#include "temper/kernels/rmsnorm.h"
#include "temper/kernels/swiglu.h"
#include "temper/model/activation_store.h"
#include "temper/model/block_products.h"
#include "temper/model/frozen_base.h"
#include "temper/model/int4_drafter.h"
#include "temper/model/lora.h"
#include "temper/model/residual_rows.h"

namespace temper {

using kernels::gemm;

namespace {
// A packed forward weight buffer (written once, then read end to end every decode step) on transparent huge pages
// where the system gives them: at batch 1 on Zen 5 the bf16 decode made 209-218 tokens/s with them, 163-198 without
// (docs/PERFORMANCE.md).
Tensor huge_paged(Tensor t) {
  advise_huge_pages(t.raw(), t.nbytes());
  return t;
}
}  // namespace

// The config is validated before the layout is sized from it (an absurd size is refused, not allocated).
Transformer::Transformer(const ModelConfig& cfg) : cfg_(cfg), layout_((cfg.validate(), cfg)) {
  params_ = Tensor::zeros({layout_.total()});
  grads_ = Tensor::zeros({layout_.total()});
  rope_ = kernels::rope_table(cfg_.max_position_embeddings, cfg_.head_dim, cfg_.rope_theta, cfg_.rope_scaling);
  if (cfg_.rope_scaling.type == kernels::RopeScaling::Type::longrope) {
    kernels::RopeScaling long_factors = cfg_.rope_scaling;
    long_factors.use_long = true;
    rope_long_ = kernels::rope_table(cfg_.max_position_embeddings, cfg_.head_dim, cfg_.rope_theta, long_factors);
  }
  if (cfg_.rope_local_theta > 0)
    rope_local_ = kernels::rope_table(cfg_.max_position_embeddings, cfg_.head_dim, cfg_.rope_local_theta);
  for (int64_t l = 0; l < cfg_.num_layers; ++l)  // an ActivationStore's fields: each layer's, then the final residual
    each_act_field(scratch_acts_, [&](float* const&, int64_t w) { act_widths_.push_back(w); });
  act_widths_.push_back(cfg_.hidden_size);
}

int64_t Transformer::num_params() const {
  int64_t n = 0;
  for (const auto& e : layout_.entries()) n += e.numel();
  return n;
}

void Transformer::attach_device(std::shared_ptr<DeviceModel> device) {
  TEMPER_CHECK(!device || !lora_) << "attach_device: LoRA adapters are attached and run on the CPU only (detach them "
                                     "with attach_lora(nullptr) first)";
  TEMPER_CHECK(!device || (!base_ && !holding_))
      << "attach_device: the base is held as bf16/int4/nf4 ([lora] base), on the CPU only";
  pull_params();
  if (device_) device_->release_moments();  // an optimizer's moments go back to its host buffers
  device_ = std::move(device);
  if (!device_) return;
  device_->set_precision(precision_);
  device_->set_recompute(recompute_);
  device_->set_params(params_.data<float>());
  if (max_tokens_ > 0) device_->plan(max_tokens_, max_seq_);
}

void Transformer::attach_lora(LoraAdapters* adapters) {
  if (adapters) {
    TEMPER_CHECK(!device_) << "attach_lora: this model runs on a device; LoRA adapters run on the CPU only so far";
    const ModelConfig& m = adapters->model_config();
    TEMPER_CHECK(m.num_layers == cfg_.num_layers && m.hidden_size == cfg_.hidden_size &&
                 m.num_heads == cfg_.num_heads && m.num_kv_heads == cfg_.num_kv_heads && m.head_dim == cfg_.head_dim &&
                 m.intermediate_size == cfg_.intermediate_size)
        << "attach_lora: the adapters were made for another model shape (layers " << m.num_layers << ", hidden "
        << m.hidden_size << ", heads " << m.num_heads << "/" << m.num_kv_heads << " of " << m.head_dim
        << ", intermediate " << m.intermediate_size << ")";
  }
  lora_ = adapters;
  lora_ws_.clear();  // sized by the next pass (prepare)
  if (adapters) hold_base(adapters->config().base);
}

void Transformer::share_weights(const Transformer& from) {
  TEMPER_CHECK(!device_ && !from.device_) << "share_weights: models on a device do not share their weights";
  TEMPER_CHECK(from.layout_.total() == layout_.total() && from.cfg_.num_layers == cfg_.num_layers &&
               from.cfg_.hidden_size == cfg_.hidden_size && from.cfg_.vocab_size == cfg_.vocab_size)
      << "share_weights: the models' shapes differ (" << from.layout_.total() << " and " << layout_.total()
      << " weights)";
  TEMPER_CHECK(!base_ || base_ == from.base_) << "share_weights: this model holds a base of its own already";
  TEMPER_CHECK(!holding_ && !from.holding_) << "share_weights: a base is still being held (plan_held_base)";
  params_ = from.params_;  // the same storage: no copy
  base_ = from.base_;
  params_bf16_ = params_bf16p_ = params_f32p_ = Tensor();  // remade from the shared values at the next pass
  packed_at_.clear();
  ++params_version_;
}

void Transformer::pull_params_from_device() const {
  device_->get_params(params_.data<float>());
  host_stale_ = false;
  ++params_version_;  // the host's bf16 copy follows
}

float* Transformer::grads() {
  if (device_) device_->get_grads(grads_.data<float>());
  return grads_.data<float>();
}

Tensor Transformer::param(const std::string& name) const {
  pull_params();
  const ParamEntry& e = layout_.at(name);
  TEMPER_CHECK(!base_ || !base_->covers(e.offset, e.numel()))
      << name << " is held in the frozen base as " << lora_base_name(base_->format()) << ": it has no f32 values";
  const FrozenBase::Weight* w = holding_ ? holding_->containing(e.offset) : nullptr;
  TEMPER_CHECK(!w || !holding_->taken(w->offset))
      << name << " is held in the frozen base as " << lora_base_name(holding_->format()) << ": it has no f32 values";
  return Tensor::wrap(params_.data<float>() + e.offset, e.shape, DType::f32);
}

Tensor Transformer::grad(const std::string& name) const {
  const ParamEntry& e = layout_.at(name);
  return Tensor::wrap(grads_.data<float>() + e.offset, e.shape, DType::f32);
}

void Transformer::init_random(uint64_t seed, float std) {
  pull_params();
  const auto& entries = layout_.entries();
  for (size_t i = 0; i < entries.size(); ++i) {
    const ParamEntry& e = entries[i];
    float* p = params() + e.offset;
    bool is_norm = e.name.find("norm.weight") != std::string::npos;
    bool is_bias = e.name.size() > 5 && e.name.compare(e.name.size() - 5, 5, ".bias") == 0;
    if (is_norm) {  // ones; Gemma's (1 + w) norms zeros (HF's init: the same scale)
      for (int64_t j = 0; j < e.numel(); ++j) p[j] = cfg_.norm_offset ? 0.0f : 1.0f;
    } else if (is_bias) {
      std::memset(p, 0, static_cast<size_t>(e.numel()) * sizeof(float));
    } else {
      rng_fill_normal(seed, i, std::span<float>(p, static_cast<size_t>(e.numel())), 0.f, std);
    }
    params_written(e.offset, e.numel());  // a planned held base takes each product as it is drawn
  }
  params_updated();
}

void Transformer::set_base_frozen(bool on) {
  if (on && !base_frozen() && !device_)
    zero_and_release(grads_.data<float>(), static_cast<size_t>(grads_.numel()) * sizeof(float));
  base_frozen_ = on;
}

void Transformer::zero_grad() {
  if (grad_sink_)
    grad_sink_->grads_zeroed();  // it gives the buffer's pages back (they read as zeros)
  else if (!base_frozen())       // frozen (LoRA): no base gradient is ever formed, the buffer's pages stay untouched
    grads_.fill_zero();
  if (lora_) lora_->zero_grad();  // the adapters' gradients accumulate beside the model's
  if (device_) device_->zero_grad();
}

void Transformer::set_recompute(bool on) {
  if (device_) device_->set_recompute(on);  // the device's training passes recompute too
  if (on == recompute_) return;
  recompute_ = on;
  if (max_tokens_ > 0) plan_host(max_tokens_, max_seq_);  // the host arena's layout
}

void Transformer::params_updated() {
  ++params_version_;
  if (device_) device_->set_params(params_.data<float>());  // the host was written (it pulled first)
}

const uint16_t* Transformer::w16(int64_t offset) const {
  return precision_ == kernels::Precision::bf16 ? params_bf16_.data<uint16_t>() + offset : nullptr;
}

int64_t Transformer::packed_offset(int64_t offset) const {
  auto it = std::lower_bound(packed_at_.begin(), packed_at_.end(), std::pair<int64_t, int64_t>{offset, INT64_MIN});
  TEMPER_CHECK(it != packed_at_.end() && it->first == offset) << "no packed copy of the weight at " << offset;
  return it->second;
}

const uint16_t* Transformer::wp(int64_t offset) const {
  if (precision_ != kernels::Precision::bf16 || !params_bf16p_.defined()) return nullptr;
  return params_bf16p_.data<uint16_t>() + packed_offset(offset);
}

const float* Transformer::wpf(int64_t offset) const {
  if (precision_ != kernels::Precision::f32 || !params_f32p_.defined() || f32p_version_ != params_version_) return nullptr;
  return params_f32p_.data<float>() + packed_offset(offset);
}

// The weights of the forward's products y = x W^T as (offset, N, K), by offset; packed_at_ their
// offsets in a packed copy (the same for f32 and bf16 copies: elements).
std::vector<Transformer::ForwardWeight> Transformer::forward_weights() {
  const auto shapes = block_products(cfg_);
  std::vector<ForwardWeight> ws;
  for (const LayerOffsets& o : layout_.layers) {
    if (base_) break;  // the held base's products use its own values
    const std::array<int64_t, 4> offsets = block_product_offsets(o);
    for (size_t i = 0; i < shapes.size(); ++i) ws.push_back({offsets[i], shapes[i].first, shapes[i].second});
  }
  ws.push_back({layout_.lm_head, cfg_.vocab_size, cfg_.hidden_size});
  std::sort(ws.begin(), ws.end(), [](const ForwardWeight& a, const ForwardWeight& b) { return a.offset < b.offset; });
  if (packed_at_.size() != ws.size()) {
    packed_at_.clear();
    packed_total_ = 0;
    for (const ForwardWeight& w : ws) {
      packed_at_.push_back({w.offset, packed_total_});
      packed_total_ += kernels::packed_size(w.N, w.K);
    }
  }
  return ws;
}

// The bf16 copies, refreshed when the weights changed: row-major (the backward's products) and, where
// the CPU runs the packed kernels, every forward weight packed (kernels::gemm_bf16_packed).
void Transformer::refresh_bf16() {
  TEMPER_PROFILE("bf16_weights");
  if (!params_bf16_.defined() || params_bf16_.numel() != layout_.total())
    params_bf16_ = Tensor::empty({layout_.total()}, DType::bf16);
  if (!base_)
    kernels::convert_to_bf16(params(), params_bf16_.data<uint16_t>(), layout_.total());
  else  // what the held base does not hold (its products read its own values)
    for (const ParamEntry& e : layout_.entries())
      if (!base_->covers(e.offset, e.numel()))
        kernels::convert_to_bf16(params() + e.offset, params_bf16_.data<uint16_t>() + e.offset, e.numel());
  if (!kernels::packed_supported()) {
    params_bf16p_ = Tensor();
    return;
  }
  const std::vector<ForwardWeight> ws = forward_weights();
  if (!params_bf16p_.defined()) params_bf16p_ = huge_paged(Tensor::empty({packed_total_}, DType::bf16));
  for (size_t i = 0; i < ws.size(); ++i)
    kernels::bf16_pack_weight(params() + ws[i].offset, ws[i].N, ws[i].K, params_bf16p_.data<uint16_t>() + packed_at_[i].second);
}

// The f32 forward weights packed for the rollout engine's decode (kernels::gemm_f32_packed), made on the
// first paged forward after the weights changed: training alone never holds this copy.
void Transformer::refresh_f32_packed() {
  if (precision_ != kernels::Precision::f32 || !kernels::packed_supported() || f32p_version_ == params_version_) return;
  TEMPER_PROFILE("f32_packed_weights");
  const std::vector<ForwardWeight> ws = forward_weights();
  if (!params_f32p_.defined()) params_f32p_ = huge_paged(Tensor::empty({packed_total_}));
  for (size_t i = 0; i < ws.size(); ++i)
    kernels::f32_pack_weight(params() + ws[i].offset, ws[i].N, ws[i].K, params_f32p_.data<float>() + packed_at_[i].second);
  f32p_version_ = params_version_;
}

void Transformer::prepare(int64_t B, int64_t T) {
  TEMPER_CHECK(B > 0 && T > 0) << "empty batch: B=" << B << " T=" << T;
  pull_params();  // before the bf16 copy is judged current
  if (precision_ == kernels::Precision::bf16 && bf16_version_ != params_version_) {
    refresh_bf16();
    bf16_version_ = params_version_;
  }
  refresh_norm_weights();
  if (B * T > max_tokens_ || T > max_seq_) plan_host(B * T > max_tokens_ ? B * T : max_tokens_, T > max_seq_ ? T : max_seq_);
  if (lora_ && static_cast<int64_t>(lora_ws_.size()) < lora_->workspace_floats(max_tokens_))
    lora_ws_.resize(static_cast<size_t>(lora_->workspace_floats(max_tokens_)));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t) pos_[b * T + t] = static_cast<int32_t>(t);
  select_rope(T);
}

Transformer::LayerActs Transformer::acts_for(int64_t l, bool save) const {
  if (!save) return scratch_acts_;
  if (!recompute_) return saved_[static_cast<size_t>(l)];
  LayerActs a = scratch_acts_;
  a.x_in = saved_[static_cast<size_t>(l)].x_in;
  return a;
}

// f32 paged products of up to this many rows (decode steps) take the packed kernel; longer ones (prefill
// chunks) oneDNN's sgemm, which is 5-15% faster there (docs/PERFORMANCE.md, "Packed forward products").
constexpr int64_t kF32PackedMaxRows = 64;

kernels::AttnOpts Transformer::attn_opts(int64_t l) const {
  kernels::AttnOpts o;
  if (cfg_.query_pre_attn_scalar > 0) o.scale = cfg_.attn_scale();
  o.softcap = static_cast<float>(cfg_.attn_softcap);
  o.window = cfg_.slides(l) ? cfg_.sliding_window : 0;
  return o;
}

const kernels::RopeTable& Transformer::rope_for(int64_t l) const {
  if (cfg_.rope_local_theta > 0 && cfg_.slides(l)) return rope_local_;
  return use_long_rope_ ? rope_long_ : rope_;
}

// HF picks longrope's factors per forward by its longest sequence; a rollout written token by token would then
// switch factors mid-sequence and its log-probs would not be the training forward's. Once plan() has fixed the
// run's longest sequence, every pass uses the factors HF would use for that length.
void Transformer::select_rope(int64_t max_pos) {
  use_long_rope_ = cfg_.rope_scaling.type == kernels::RopeScaling::Type::longrope &&
                   (rope_context_ > 0 ? rope_context_ : max_pos) > cfg_.rope_scaling.original_max_position;
}

void Transformer::act_fwd(const float* gu, float* h, int64_t N) const {
  TEMPER_PROFILE("swiglu");
  if (cfg_.act == Activation::gelu_tanh)
    kernels::geglu_fwd(gu, h, N, cfg_.intermediate_size);
  else
    kernels::swiglu_fwd(gu, h, N, cfg_.intermediate_size);
}

void Transformer::act_bwd(const float* gu, const float* dh, float* dgu, int64_t N) const {
  TEMPER_PROFILE("swiglu");
  if (cfg_.act == Activation::gelu_tanh)
    kernels::geglu_bwd(gu, dh, dgu, N, cfg_.intermediate_size);
  else
    kernels::swiglu_bwd(gu, dh, dgu, N, cfg_.intermediate_size);
}

const float* Transformer::nw(int64_t offset) const {
  if (!cfg_.norm_offset) return params() + offset;
  auto it = std::lower_bound(norm_at_.begin(), norm_at_.end(), std::pair<int64_t, int64_t>{offset, INT64_MIN});
  TEMPER_CHECK(it != norm_at_.end() && it->first == offset) << "no norm weight at " << offset;
  return norm_eff_.data() + it->second;
}

// Gemma's RMSNorm scales by (1 + w) (HF: output * (1.0 + weight.float())): the sums, in f32, once per weight
// version; the kernels take them as the weight (the gradient w.r.t. w equals that w.r.t. 1 + w).
void Transformer::refresh_norm_weights() {
  if (!cfg_.norm_offset || norm_version_ == params_version_) return;
  if (norm_at_.empty()) {
    int64_t n = 0;
    for (const ParamEntry& e : layout_.entries())
      if (e.name.size() > 11 && e.name.compare(e.name.size() - 11, 11, "norm.weight") == 0) {
        norm_at_.push_back({e.offset, n});
        n += e.numel();
      }
    std::sort(norm_at_.begin(), norm_at_.end());
    norm_eff_.resize(static_cast<size_t>(n));
  }
  const float* P = params();
  for (const ParamEntry& e : layout_.entries()) {
    auto it = std::lower_bound(norm_at_.begin(), norm_at_.end(), std::pair<int64_t, int64_t>{e.offset, INT64_MIN});
    if (it == norm_at_.end() || it->first != e.offset) continue;
    for (int64_t j = 0; j < e.numel(); ++j) norm_eff_[static_cast<size_t>(it->second + j)] = 1.0f + P[e.offset + j];
  }
  norm_version_ = params_version_;
}

void Transformer::embed(const int32_t* tokens, int64_t N, float* x) {
  const int64_t C = cfg_.hidden_size;
  TEMPER_PROFILE("embedding");
  kernels::embedding_fwd(params() + layout_.embed, tokens, x, N, cfg_.vocab_size, C);
  if (!cfg_.embed_scale) return;
  // HF Gemma: embeddings * tensor(hidden_size ** 0.5) in the weights' dtype.
  const float s = static_cast<float>(std::sqrt(static_cast<double>(C)));
  for (int64_t i = 0; i < N * C; ++i) x[i] *= s;
}

// The lookup's gradient into the embedding rows; the padding_idx row gets none (nn.Embedding(padding_idx)).
void Transformer::embed_backward(const int32_t* tokens, int64_t N, float* dx) {
  if (base_frozen()) return;  // no gradient for the embedding (dx is not used after it)
  const int64_t C = cfg_.hidden_size;
  if (cfg_.embed_scale) {
    const float s = static_cast<float>(std::sqrt(static_cast<double>(C)));
    for (int64_t i = 0; i < N * C; ++i) dx[i] *= s;
  }
  if (cfg_.pad_token_id >= 0)
    for (int64_t n = 0; n < N; ++n)
      if (tokens[n] == cfg_.pad_token_id) std::fill(dx + n * C, dx + (n + 1) * C, 0.f);
  TEMPER_PROFILE("embedding");
  kernels::embedding_bwd(dx, tokens, grads() + layout_.embed, N, C);
}

// From q/k/v (a.qkv, after the projection and q/k norms) to the attention output a.o: RoPE, the bf16 rounding
// of K/V, then the paged, packed or plain attention.
void Transformer::attention_forward(int64_t l, const LayerActs& a, int64_t B, int64_t T, const PagedStep* paged,
                                    KvPool* pool) {
  const int64_t N = B * T, D = cfg_.head_dim, H = cfg_.num_heads, Hkv = cfg_.num_kv_heads, Hq = H * D, Hk = Hkv * D,
                QKV = cfg_.qkv_dim();
  const kernels::RopeTable& rope = rope_for(l);
  {
    TEMPER_PROFILE("rope");
    kernels::rope_fwd(a.qkv, pos_, rope, N, H, D, QKV);
  }
  {
    TEMPER_PROFILE("rope");
    kernels::rope_fwd(a.qkv + Hq, pos_, rope, N, Hkv, D, QKV);
  }
  // bf16: K and V rounded to bf16 (the values a bf16 KV cache holds), in training and rollouts alike,
  // so that rollout log-probs equal the training forward's; the gradient passes straight through.
  if (precision_ == kernels::Precision::bf16) kernels::round_to_bf16(a.qkv + Hq, N, 2 * Hk, QKV);
  const kernels::AttnOpts opt = attn_opts(l);
  TEMPER_PROFILE("attention");
  if (paged) {  // write every token's K/V into its sequence's blocks, then attend over the block tables
    pool->write_rows(l, paged->tables, paged->pos, N, a.qkv + Hq, a.qkv + Hq + Hk, QKV);
    attend_paged(l, a, *paged, *pool, opt);
  } else if (segs_) {
    kernels::PackedAttnShape s{N, H, Hkv, D, QKV, QKV, Hq, segs_->data(), static_cast<int64_t>(segs_->size()), opt};
    kernels::attention_fwd_packed(s, a.qkv, a.qkv + Hq, a.qkv + Hq + Hk, a.o, a.lse);
  } else {
    kernels::AttnShape s{B, T, H, Hkv, D, QKV, QKV, Hq, opt};
    kernels::attention_fwd(s, a.qkv, a.qkv + Hq, a.qkv + Hq + Hk, a.o, a.lse);
  }
}

void Transformer::layer_forward(int64_t l, const LayerActs& a, float* x_out, int64_t B, int64_t T,
                                const PagedStep* paged, KvPool* pool, const Int4Layer* q4) {
  const LayerOffsets& o = layout_.layers[static_cast<size_t>(l)];
  const float* P = params();
  const int64_t N = B * T, C = cfg_.hidden_size, D = cfg_.head_dim, H = cfg_.num_heads, Hkv = cfg_.num_kv_heads,
                Hq = H * D, Hk = Hkv * D, QKV = cfg_.qkv_dim(), F = cfg_.intermediate_size;
  const float eps = static_cast<float>(cfg_.rms_norm_eps);
  const bool sandwich = cfg_.sandwich_norm;
  auto norm = [&](const float* x, int64_t w, float* y, float* rstd) {
    TEMPER_PROFILE("rmsnorm");
    kernels::rmsnorm_fwd(x, nw(w), y, rstd, N, C, eps);
  };
  // y = x W^T (+ y): the f32/bf16 weight, or the drafter's 4-bit copy.
  auto linear = [&](int64_t out, int64_t in, const float* x, int64_t w, const kernels::Int4Weights* w4, float beta,
                    float* y) {
    TEMPER_PROFILE("gemm");
    if (w4)
      kernels::int4_gemm(N, x, in, *w4, beta != 0.f, y, out);
    else if (base_)
      base_->forward(w, N, x, in, beta, y, out, precision_);
    else if (const uint16_t* p = wp(w))
      kernels::gemm_bf16_packed(N, out, in, x, in, p, beta, y, out);
    else if (const float* p = paged && N <= kF32PackedMaxRows ? wpf(w) : nullptr)
      kernels::gemm_f32_packed(N, out, in, x, in, p, beta, y, out);
    else if (paged)
      kernels::gemm_decode(N, out, in, x, in, P + w, in, beta, y, out, precision_, w16(w));  // the rollout engine
    else
      gemm(false, true, N, out, in, x, in, P + w, in, beta, y, out, precision_, w16(w));
  };
  // Attention block: x_mid = x_in + [post-norm] attn(rope(norm(x_in) Wqkv^T)) Wo^T.
  norm(a.x_in, o.attn_norm, xn_, a.rstd1);
  float* qkv_out = cfg_.qk_norm ? a.qkv_pre : a.qkv;
  // The adapters' share of a product's output (lora.h): f32 whatever the precision, the drafter's pass included.
  auto adapt = [&](LoraGroup g, const float* x, float* y, int64_t ldy) {
    if (!lora_ || !lora_on_) return;
    TEMPER_PROFILE("lora");
    lora_->forward(l, g, x, N, y, ldy, lora_ws_.data());
  };
  linear(QKV, C, xn_, o.w_qkv, q4 ? &q4->qkv : nullptr, 0.f, qkv_out);
  adapt(LoraGroup::qkv, xn_, qkv_out, QKV);
  if (cfg_.qkv_bias) kernels::bias_add(qkv_out, P + o.b_qkv, N, QKV);
  if (cfg_.qk_norm) {  // Qwen3, Gemma-3: per-head RMSNorm on q and k before RoPE; v copied through
    TEMPER_PROFILE("rmsnorm");
    kernels::rmsnorm_heads_fwd(a.qkv_pre, nw(o.q_norm), a.qkv, a.q_rstd, N, H, D, QKV, eps);
    kernels::rmsnorm_heads_fwd(a.qkv_pre + Hq, nw(o.k_norm), a.qkv + Hq, a.k_rstd, N, Hkv, D, QKV, eps);
    for (int64_t n = 0; n < N; ++n)
      std::memcpy(a.qkv + n * QKV + Hq + Hk, a.qkv_pre + n * QKV + Hq + Hk, static_cast<size_t>(Hk) * sizeof(float));
  }
  attention_forward(l, a, B, T, paged, pool);
  copy_rows(a.x_mid, a.x_in, N, C);
  if (sandwich) {  // Gemma: the output normed before the residual add
    linear(C, Hq, a.o, o.w_o, q4 ? &q4->o : nullptr, 0.f, a.ao);
    adapt(LoraGroup::o, a.o, a.ao, C);
    norm(a.ao, o.attn_post_norm, xn_, a.rstd3);
    add_rows(a.x_mid, xn_, N, C);
  } else {
    linear(C, Hq, a.o, o.w_o, q4 ? &q4->o : nullptr, 1.f, a.x_mid);
    adapt(LoraGroup::o, a.o, a.x_mid, C);
  }
  // MLP block: x_out = x_mid + [post-norm] act(norm(x_mid) Wgu^T) Wd^T.
  norm(a.x_mid, o.mlp_norm, xn_, a.rstd2);
  linear(2 * F, C, xn_, o.w_gu, q4 ? &q4->gu : nullptr, 0.f, a.gu);
  adapt(LoraGroup::gate_up, xn_, a.gu, 2 * F);
  act_fwd(a.gu, h_, N);
  copy_rows(x_out, a.x_mid, N, C);
  if (sandwich) {
    linear(C, F, h_, o.w_down, q4 ? &q4->down : nullptr, 0.f, a.mo);
    adapt(LoraGroup::down, h_, a.mo, C);
    norm(a.mo, o.mlp_post_norm, xn_, a.rstd4);
    add_rows(x_out, xn_, N, C);
  } else {
    linear(C, F, h_, o.w_down, q4 ? &q4->down : nullptr, 1.f, x_out);
    adapt(LoraGroup::down, h_, x_out, C);
  }
}

// d o_ (the attention output's gradient) -> dqkv_ (after RoPE's and the q/k norms' backward).
void Transformer::attention_backward(int64_t l, const LayerActs& a, int64_t B, int64_t T) {
  const LayerOffsets& o = layout_.layers[static_cast<size_t>(l)];
  float* G = base_frozen() ? nullptr : grads();  // frozen: the q/k norms' and biases' gradients are not formed
  const int64_t N = B * T, D = cfg_.head_dim, H = cfg_.num_heads, Hkv = cfg_.num_kv_heads, Hq = H * D, Hk = Hkv * D,
                QKV = cfg_.qkv_dim();
  const kernels::AttnOpts opt = attn_opts(l);
  {
    TEMPER_PROFILE("attention");
    if (segs_) {
      kernels::PackedAttnShape s{N, H, Hkv, D, QKV, QKV, Hq, segs_->data(), static_cast<int64_t>(segs_->size()), opt};
      s.precision = precision_;  // bf16: the gradient products in bf16 (the forward stays f32: attention.h)
      kernels::attention_bwd_packed(s, a.qkv, a.qkv + Hq, a.qkv + Hq + Hk, a.o, a.lse, do_, dqkv_, dqkv_ + Hq,
                                    dqkv_ + Hq + Hk);
    } else {
      kernels::AttnShape s{B, T, H, Hkv, D, QKV, QKV, Hq, opt};
      s.precision = precision_;
      kernels::attention_bwd(s, a.qkv, a.qkv + Hq, a.qkv + Hq + Hk, a.o, a.lse, do_, dqkv_, dqkv_ + Hq,
                             dqkv_ + Hq + Hk);
    }
  }
  const kernels::RopeTable& rope = rope_for(l);
  {
    TEMPER_PROFILE("rope");
    kernels::rope_bwd(dqkv_, pos_, rope, N, H, D, QKV);
  }
  {
    TEMPER_PROFILE("rope");
    kernels::rope_bwd(dqkv_ + Hq, pos_, rope, N, Hkv, D, QKV);
  }
  if (cfg_.qk_norm) {
    TEMPER_PROFILE("rmsnorm");
    kernels::rmsnorm_heads_bwd(dqkv_, a.qkv_pre, nw(o.q_norm), a.q_rstd, dqkv_, G ? G + o.q_norm : nullptr, N, H, D,
                               QKV);
    kernels::rmsnorm_heads_bwd(dqkv_ + Hq, a.qkv_pre + Hq, nw(o.k_norm), a.k_rstd, dqkv_ + Hq,
                               G ? G + o.k_norm : nullptr, N, Hkv, D, QKV);
  }
  if (cfg_.qkv_bias && G) kernels::bias_grad(dqkv_, G + o.b_qkv, N, QKV);
}

// dx: gradient w.r.t. the layer's output on entry, w.r.t. its input on return.
void Transformer::layer_backward(int64_t l, const LayerActs& a, float* dx, int64_t B, int64_t T) {
  const LayerOffsets& o = layout_.layers[static_cast<size_t>(l)];
  const float* P = params();
  float* G = base_frozen() ? nullptr : grads();  // frozen (LoRA): no base weight's gradient is formed
  const int64_t N = B * T, C = cfg_.hidden_size, Hq = cfg_.num_heads * cfg_.head_dim, QKV = cfg_.qkv_dim(),
                F = cfg_.intermediate_size;
  const float eps = static_cast<float>(cfg_.rms_norm_eps);
  auto mm = [&](bool ta, int64_t M, int64_t Nn, int64_t K, const float* A, int64_t lda, const float* Bm, int64_t ldb,
                float beta, float* Cm, int64_t ldc, const uint16_t* b16 = nullptr) {
    TEMPER_PROFILE("gemm");
    gemm(ta, false, M, Nn, K, A, lda, Bm, ldb, beta, Cm, ldc, precision_, b16);
  };
  auto norm_bwd = [&](const float* dy, const float* x, int64_t w, const float* rstd, float* dxo, bool acc) {
    TEMPER_PROFILE("rmsnorm");
    kernels::rmsnorm_bwd(dy, x, nw(w), rstd, dxo, G ? G + w : nullptr, N, C, acc);
  };
  // A base weight's gradient dW += dy^T x (skipped with the base frozen).
  auto dw = [&](int64_t out, int64_t in, const float* dy, const float* x, int64_t w) {
    if (G) mm(true, out, in, N, dy, out, x, in, 1.f, G + w, in);
  };
  // The input's gradient through a base weight W [out, in]: dx = dy W (a held base: from its values).
  auto dxw = [&](int64_t out, int64_t in, const float* dy, int64_t w, float* dxo) {
    if (!base_) return mm(false, N, in, out, dy, out, P + w, in, 0.f, dxo, in, w16(w));
    TEMPER_PROFILE("gemm");
    base_->backward_input(w, N, dy, out, 0.f, dxo, in, precision_);
  };
  // The adapters' gradients, and their share of the input's gradient added to dx_in (after the base product's).
  auto adapt = [&](LoraGroup g, const float* x, const float* dy, int64_t ldy, float* dx_in) {
    if (!lora_ || !lora_on_) return;
    TEMPER_PROFILE("lora");
    lora_->backward(l, g, x, dy, ldy, N, dx_in, lora_ws_.data());
  };
  // MLP block: x_out = x_mid + [post-norm] act(norm(x_mid) Wgu^T) Wd^T.
  act_fwd(a.gu, h_, N);
  const float* dmo = dx;  // the gradient at the down projection's output
  if (cfg_.sandwich_norm) {
    norm_bwd(dx, a.mo, o.mlp_post_norm, a.rstd4, dxn_, false);
    dmo = dxn_;
  }
  dxw(C, F, dmo, o.w_down, dh_);
  dw(C, F, dmo, h_, o.w_down);
  adapt(LoraGroup::down, h_, dmo, C, dh_);
  act_bwd(a.gu, dh_, dgu_, N);
  {
    TEMPER_PROFILE("rmsnorm");
    kernels::rmsnorm_fwd(a.x_mid, nw(o.mlp_norm), xn_, rstd_tmp_, N, C, eps);
  }
  dw(2 * F, C, dgu_, xn_, o.w_gu);
  dxw(2 * F, C, dgu_, o.w_gu, dxn_);
  adapt(LoraGroup::gate_up, xn_, dgu_, 2 * F, dxn_);
  norm_bwd(dxn_, a.x_mid, o.mlp_norm, a.rstd2, dx, true);
  // Attention block: x_mid = x_in + [post-norm] attn(rope(norm(x_in) Wqkv^T)) Wo^T.
  const float* dao = dx;
  if (cfg_.sandwich_norm) {
    norm_bwd(dx, a.ao, o.attn_post_norm, a.rstd3, dxn_, false);
    dao = dxn_;
  }
  dxw(C, Hq, dao, o.w_o, do_);
  dw(C, Hq, dao, a.o, o.w_o);
  adapt(LoraGroup::o, a.o, dao, C, do_);
  attention_backward(l, a, B, T);
  {
    TEMPER_PROFILE("rmsnorm");
    kernels::rmsnorm_fwd(a.x_in, nw(o.attn_norm), xn_, rstd_tmp_, N, C, eps);
  }
  dw(QKV, C, dqkv_, xn_, o.w_qkv);
  dxw(QKV, C, dqkv_, o.w_qkv, dxn_);
  adapt(LoraGroup::qkv, xn_, dqkv_, QKV, dxn_);
  norm_bwd(dxn_, a.x_in, o.attn_norm, a.rstd1, dx, true);
}

// Embedding and every layer; leaves the final residual stream in x_final_ and its norm in xn_.
void Transformer::trunk_forward(const int32_t* tokens, int64_t B, int64_t T, bool save) {
  const int64_t N = B * T, C = cfg_.hidden_size, L = cfg_.num_layers;
  LayerActs first = acts_for(0, save);
  embed(tokens, N, first.x_in);
  for (int64_t l = 0; l < L; ++l) {
    LayerActs a = acts_for(l, save);
    float* x_out;
    if (l + 1 == L) {
      x_out = x_final_;
    } else if (save) {
      x_out = acts_for(l + 1, true).x_in;
    } else {  // forward only: ping-pong between scratch x_in and x_tmp
      x_out = x_tmp_;
    }
    layer_forward(l, a, x_out, B, T);
    if (!save && l + 1 < L) copy_rows(scratch_acts_.x_in, x_tmp_, N, C);
  }
  kernels::rmsnorm_fwd(x_final_, nw(layout_.final_norm), xn_, rstd_f_, N, C, static_cast<float>(cfg_.rms_norm_eps));
}

// The LM head over the final normed hidden states xn_ (forward part; the caller adds the loss).
kernels::ClassifierArgs Transformer::classifier_args(const int32_t* targets, int64_t N, float* logprob,
                                                     float* entropy) {
  kernels::ClassifierArgs ca;
  ca.h = xn_;
  ca.w = params() + layout_.lm_head;
  ca.w_bf16 = w16(layout_.lm_head);
  ca.w_bf16_packed = wp(layout_.lm_head);
  ca.targets = targets;
  ca.N = N;
  ca.C = cfg_.hidden_size;
  ca.V = cfg_.vocab_size;
  ca.logprob = logprob;
  ca.entropy = entropy;
  ca.precision = precision_;
  ca.softcap = static_cast<float>(cfg_.final_softcap);
  ca.workspace = classifier_ws_;
  ca.workspace_floats = classifier_ws_floats_;
  return ca;
}

void Transformer::forward_backward(const int32_t* tokens, const int32_t* targets, int64_t B, int64_t T,
                                   const kernels::ClassifierLoss& loss, float* logprob, float* entropy) {
  if (loss.no_gradient()) return forward_logprobs(tokens, targets, B, T, logprob, entropy);
  if (device_) return device_->forward_backward(tokens, targets, B, T, loss, logprob, entropy);
  prepare(B, T);
  backward_from_classifier(tokens, targets, B, T, loss, logprob, entropy);
}

// The training pass after prepare: forward with saved activations, the fused classifier and loss,
// then every layer's backward into grads().
void Transformer::backward_from_classifier(const int32_t* tokens, const int32_t* targets, int64_t B, int64_t T,
                                           const kernels::ClassifierLoss& loss, float* logprob, float* entropy) {
  trunk_forward(tokens, B, T, true);
  backward_rest(tokens, targets, B, T, loss, logprob, entropy);
}

// The classifier with its loss over xn_ (the final norm of x_final_), then every layer's backward.
void Transformer::backward_rest(const int32_t* tokens, const int32_t* targets, int64_t B, int64_t T,
                                const kernels::ClassifierLoss& loss, float* logprob, float* entropy) {
  const int64_t N = B * T, C = cfg_.hidden_size;
  kernels::ClassifierArgs ca = classifier_args(targets, N, logprob, entropy);
  ca.loss = &loss;
  ca.dh = dxn_;
  float* G = base_frozen() ? nullptr : grads();  // frozen (LoRA): the LM head's dW (a V x C product) is not formed
  ca.dw = G ? G + layout_.lm_head : nullptr;
  { TEMPER_PROFILE("classifier"); kernels::classifier_fused(ca); }
  kernels::rmsnorm_bwd(dxn_, x_final_, nw(layout_.final_norm), rstd_f_, dx_, G ? G + layout_.final_norm : nullptr, N, C,
                       false);
  grads_final(static_cast<size_t>(cfg_.num_layers) + 1);
  for (int64_t l = cfg_.num_layers - 1; l >= 0; --l) {
    LayerActs a = acts_for(l, true);
    if (recompute_) layer_forward(l, a, x_tmp_, B, T);
    layer_backward(l, a, dx_, B, T);
    grads_final(static_cast<size_t>(l) + 1);
  }
  embed_backward(tokens, N, dx_);
  grads_final(0);
}

void Transformer::forward_logprobs(const int32_t* tokens, const int32_t* targets, int64_t B, int64_t T, float* logprob,
                                   float* entropy) {
  if (device_) return device_->forward_logprobs(tokens, targets, B, T, logprob, entropy);
  prepare(B, T);
  trunk_forward(tokens, B, T, false);
  kernels::ClassifierArgs ca = classifier_args(targets, B * T, logprob, entropy);
  { TEMPER_PROFILE("classifier"); kernels::classifier_fused(ca); }
}

// One layer's fields in an ActivationStore, in this order (lse last: [rows, H] in the paged pass).
template <class A, class Fn>
void Transformer::each_act_field(A& a, Fn&& f) const {
  const int64_t C = cfg_.hidden_size, QKV = cfg_.qkv_dim(), H = cfg_.num_heads, Hkv = cfg_.num_kv_heads;
  f(a.x_in, C);
  f(a.rstd1, 1);
  if (cfg_.qk_norm) {
    f(a.qkv_pre, QKV);
    f(a.q_rstd, H);
    f(a.k_rstd, Hkv);
  }
  f(a.qkv, QKV);
  f(a.o, H * cfg_.head_dim);
  f(a.x_mid, C);
  f(a.rstd2, 1);
  f(a.gu, 2 * cfg_.intermediate_size);
  if (cfg_.sandwich_norm) {
    f(a.ao, C);
    f(a.rstd3, 1);
    f(a.mo, C);
    f(a.rstd4, 1);
  }
  f(a.lse, H);
}

int64_t Transformer::act_layer_fields() const {  // the widths hold each layer's fields, then the final residual
  return (static_cast<int64_t>(act_widths_.size()) - 1) / cfg_.num_layers;
}

bool Transformer::reusable(const ActivationStore& store) const {
  return !device_ && !recompute_ && !lora_ && store.params_version() == params_version_ &&
         store.field_widths() == act_field_widths();
}

// Layer l's fields at `slot` and the rows after it (l = num_layers: only x_in, the final residual).
Transformer::LayerActs Transformer::store_view(ActivationStore& store, int64_t l, int64_t slot) const {
  LayerActs a{};
  size_t k = static_cast<size_t>(l * act_layer_fields());
  if (l == cfg_.num_layers) {
    a.x_in = store.field(k) + slot * cfg_.hidden_size;
    return a;
  }
  each_act_field(a, [&](float*& p, int64_t w) {
    p = store.field(k) + slot * w;
    ++k;
  });
  return a;
}

// Layer l's values of the step's kept rows into their slots (l = num_layers: the final residual, in
// scratch x_in after the last layer), where the paged pass did not write them there itself.
void Transformer::store_rows(int64_t l, const PagedStep& st) const {
  TEMPER_PROFILE("keep_activations");
  const size_t k0 = static_cast<size_t>(l * act_layer_fields());
  ActivationStore& store = *st.store;
  parallel_for(st.n, 16, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const int64_t slot = st.save_slots[i];
      if (slot < 0) continue;
      size_t k = k0;
      auto put = [&](const float* src, int64_t w) {
        std::memcpy(store.field(k++) + slot * w, src + i * w, static_cast<size_t>(w) * sizeof(float));
      };
      if (l == cfg_.num_layers)
        put(scratch_acts_.x_in, cfg_.hidden_size);
      else
        each_act_field(scratch_acts_, [&](float* const& p, int64_t w) { put(p, w); });
    }
  });
}

// Every layer's saved activations and the final residual of the N packed rows from their slots (the
// packed pass's lse is [H, N]).
void Transformer::gather_rows(const ActivationStore& store, const int64_t* slots, int64_t N, bool layers) {
  TEMPER_PROFILE("reuse_activations");
  const int64_t H = cfg_.num_heads, C = cfg_.hidden_size, L = cfg_.num_layers;
  for (int64_t n = 0; n < N; ++n)
    TEMPER_CHECK(slots[n] >= 0 && slots[n] < store.size()) << "reused activations: row " << n << " has no slot";
  parallel_for(N, 16, [&](int64_t b, int64_t e) {
    size_t k = layers ? 0 : static_cast<size_t>(L * act_layer_fields());  // the final residual is the last field
    for (int64_t l = 0; layers && l < L; ++l)
      each_act_field(saved_[static_cast<size_t>(l)], [&](float* const& dst, int64_t w) {
        const float* src = store.field(k++);
        if (dst == saved_[static_cast<size_t>(l)].lse) {
          for (int64_t n = b; n < e; ++n)
            for (int64_t h = 0; h < H; ++h) dst[h * N + n] = src[slots[n] * H + h];
          return;
        }
        for (int64_t n = b; n < e; ++n)
          std::memcpy(dst + n * w, src + slots[n] * w, static_cast<size_t>(w) * sizeof(float));
      });
    const float* src = store.field(k);
    for (int64_t n = b; n < e; ++n)
      std::memcpy(x_final_ + n * C, src + slots[n] * C, static_cast<size_t>(C) * sizeof(float));
  });
}

void Transformer::forward_logits(const int32_t* tokens, int64_t B, int64_t T, float* logits) {
  prepare(B, T);
  trunk_forward(tokens, B, T, false);
  if (const uint16_t* p = wp(layout_.lm_head))
    kernels::gemm_bf16_packed(B * T, cfg_.vocab_size, cfg_.hidden_size, xn_, cfg_.hidden_size, p, 0.f, logits, cfg_.vocab_size);
  else
    gemm(false, true, B * T, cfg_.vocab_size, cfg_.hidden_size, xn_, cfg_.hidden_size, params() + layout_.lm_head,
         cfg_.hidden_size, 0.f, logits, cfg_.vocab_size, precision_, w16(layout_.lm_head));
  kernels::softcap_rows(logits, B * T * cfg_.vocab_size, static_cast<float>(cfg_.final_softcap));
}

void Transformer::forward_hidden(const int32_t* tokens, int64_t B, int64_t T, float* hidden) {
  prepare(B, T);
  trunk_forward(tokens, B, T, false);
  std::copy(xn_, xn_ + B * T * cfg_.hidden_size, hidden);
}

int64_t Transformer::prepare_packed(const std::vector<kernels::AttnSegment>& segs) {
  TEMPER_CHECK(!device_) << "packed batches run on the CPU model (a device takes padded batches)";
  int64_t N = 0, longest = 1;
  for (const kernels::AttnSegment& g : segs) {
    N = std::max(N, g.start + g.len);
    longest = std::max(longest, g.prefix_len + g.len);
  }
  TEMPER_CHECK(N > 0) << "empty packed batch";
  TEMPER_CHECK(longest <= cfg_.max_position_embeddings)
      << "a packed sequence of " << longest << " tokens exceeds the model's max_position_embeddings "
      << cfg_.max_position_embeddings;
  prepare(1, N);  // weights, the arena for N rows; positions are the segments'
  for (int64_t n = 0; n < N; ++n) pos_[n] = -1;
  for (const kernels::AttnSegment& g : segs)
    for (int64_t t = 0; t < g.len; ++t) pos_[g.start + t] = static_cast<int32_t>(g.prefix_len + t);
  for (int64_t n = 0; n < N; ++n) TEMPER_CHECK(pos_[n] >= 0) << "packed batch: row " << n << " belongs to no segment";
  select_rope(longest);
  return N;
}

namespace {
struct SegmentsScope {  // the packed pass's segments, for the layers' attention, until the pass ends
  const std::vector<kernels::AttnSegment>*& slot;
  SegmentsScope(const std::vector<kernels::AttnSegment>*& s, const std::vector<kernels::AttnSegment>& segs) : slot(s) {
    slot = &segs;
  }
  ~SegmentsScope() { slot = nullptr; }
};
}  // namespace

void Transformer::forward_backward_packed(const int32_t* tokens, const int32_t* targets,
                                          const std::vector<kernels::AttnSegment>& segs,
                                          const kernels::ClassifierLoss& loss, float* logprob, float* entropy) {
  if (loss.no_gradient()) return forward_logprobs_packed(tokens, targets, segs, logprob, entropy);
  const int64_t N = prepare_packed(segs);
  SegmentsScope scope(segs_, segs);
  backward_from_classifier(tokens, targets, 1, N, loss, logprob, entropy);
}

void Transformer::forward_backward_packed(const int32_t* tokens, const int32_t* targets,
                                          const std::vector<kernels::AttnSegment>& segs,
                                          const kernels::ClassifierLoss& loss, float* logprob, float* entropy,
                                          const ActivationStore& store, const int64_t* slots) {
  TEMPER_CHECK(reusable(store)) << "forward_backward_packed: the activation store holds other weights' activations "
                                   "(or this model recomputes, or runs on a device)";
  const int64_t N = prepare_packed(segs);
  SegmentsScope scope(segs_, segs);
  const bool backward = !loss.no_gradient();  // without: the final residual is all the classifier reads
  gather_rows(store, slots, N, backward);
  kernels::rmsnorm_fwd(x_final_, nw(layout_.final_norm), xn_, rstd_f_, N, cfg_.hidden_size,
                       static_cast<float>(cfg_.rms_norm_eps));
  if (backward) return backward_rest(tokens, targets, 1, N, loss, logprob, entropy);
  kernels::ClassifierArgs ca = classifier_args(targets, N, logprob, entropy);
  TEMPER_PROFILE("classifier");
  kernels::classifier_fused(ca);
}

void Transformer::forward_logprobs_packed(const int32_t* tokens, const int32_t* targets,
                                          const std::vector<kernels::AttnSegment>& segs, float* logprob,
                                          float* entropy) {
  const int64_t N = prepare_packed(segs);
  SegmentsScope scope(segs_, segs);
  trunk_forward(tokens, 1, N, false);
  kernels::ClassifierArgs ca = classifier_args(targets, N, logprob, entropy);
  {
    TEMPER_PROFILE("classifier");
    kernels::classifier_fused(ca);
  }
}

}  // namespace temper
