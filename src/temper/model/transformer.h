// The Llama-family decoder for training: parameters, gradients (one flat buffer each, laid out by
// ParamLayout), explicit forward and backward per layer (llm.c style, no autograd tape), and the
// activations saved for backward in an arena planned once from (B, T). The loss is applied through
// the fused classifier, so [B*T, V] logits never exist during training. Optional per-layer
// recomputation keeps only each layer's input and recomputes the rest in the backward.
// Follows HF's Llama, Qwen2, Qwen3, Mistral, Gemma-2, Gemma-3 (text) and Phi-3 causal LMs (eager attention).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "temper/core/arena.h"
#include "temper/core/tensor.h"
#include "temper/kernels/attention.h"
#include "temper/kernels/classifier.h"
#include "temper/kernels/matmul.h"
#include "temper/kernels/rope.h"
#include "temper/model/config.h"
#include "temper/model/device_model.h"
#include "temper/model/kv_pool.h"
#include "temper/model/param_layout.h"

namespace temper {

class ActivationStore;
class FrozenBase;
class LoraAdapters;
enum class LoraBase;

// One step of batched generation over the paged KV cache: n tokens from any number of sequences
// (prefill chunks and decode tokens mixed). Token i sits at position pos[i] of the sequence whose
// block table is tables[i]; blocks for every position must be reserved (KvPool::reserve) first, and
// the caller advances the sequences after. Logits are written for the rows listed in out_rows.
struct PagedStep {
  int64_t n = 0;
  const int32_t* tokens = nullptr;
  const int32_t* pos = nullptr;
  const int32_t* const* tables = nullptr;
  const int64_t* out_rows = nullptr;
  int64_t n_out = 0;
  float* logits = nullptr;  // [n_out, V]
  // Optional: row i's activations are kept in store slot save_slots[i] (-1: not kept); see
  // activation_store.h. Ignored on a device and for the drafter's passes.
  ActivationStore* store = nullptr;
  const int64_t* save_slots = nullptr;
  // Optional: runs of rows (start, len; the other fields 0) that are a request's prompt prefilled from position 0:
  // its positions 0..len-1 in order, one block table. They attend on the training forward's tiles over their own
  // K/V rows (kernels::attention_fwd_packed); every other row reads the block tables row by row. Which rows take
  // the tiles must depend only on the sequence, never on the step (a sequence recomputed after an eviction marks its
  // prompt again, and only its prompt), so that its tokens do not depend on when it was evicted.
  const kernels::AttnSegment* prompt_runs = nullptr;
  int64_t n_prompt_runs = 0;
};

class Int4Drafter;
struct Int4Layer;

class Transformer {
 public:
  explicit Transformer(const ModelConfig& cfg);

  const ModelConfig& config() const { return cfg_; }
  const ParamLayout& layout() const { return layout_; }
  int64_t num_params() const;  // parameters (without padding)
  int64_t flat_size() const { return layout_.total(); }
  // With a device attached, reading the host weights first copies the device's newer ones back.
  float* params() {
    pull_params();
    return params_.data<float>();
  }
  const float* params() const {
    pull_params();
    return params_.data<float>();
  }
  float* grads();  // with a device: copied back from it (tests, diagnostics; the optimizer steps there)
  Tensor param(const std::string& hf_name) const;  // a view into the flat buffer
  Tensor grad(const std::string& hf_name) const;

  // Hugging Face's default init: N(0, std) for matrices and embeddings, ones for norms, zero biases.
  void init_random(uint64_t seed, float std = 0.02f);
  void zero_grad();
  // Gradient sharding (ZeRO-2, optimizer.h). With a sink, a CPU backward calls grads_final(i) as soon as it wrote the
  // last gradient of layout().ranges()[i], last range to first: the final norm's (with an untied LM head) after its
  // backward, layer l's (range l + 1) after that layer's, the embedding's (tied: the LM head's too) at the end; and
  // zero_grad() calls grads_zeroed() instead of writing zeros. Not owned; null: none.
  struct GradSink {
    virtual ~GradSink() = default;
    virtual void grads_final(size_t range) = 0;
    virtual void grads_zeroed() = 0;
  };
  void set_grad_sink(GradSink* sink) { grad_sink_ = sink; }
  GradSink* grad_sink() const { return grad_sink_; }
  // Call after writing params() (optimizer step, loading): the bf16 copy is refreshed lazily.
  void params_updated();

  void set_precision(kernels::Precision p) {
    precision_ = p;
    if (device_) device_->set_precision(p);
  }
  kernels::Precision precision() const { return precision_; }
  // Runs forward_backward, forward_logprobs and forward_paged (and the optimizer step) on `device`
  // from now on (null: back to the CPU); the host weights are copied there now. See device_model.h.
  void attach_device(std::shared_ptr<DeviceModel> device);
  DeviceModel* device() const { return device_.get(); }
  // The device changed the weights (an optimizer step there): the host copy is stale until read.
  void device_params_changed() {
    host_stale_ = true;
    ++params_version_;  // the host's bf16 copy is stale too
  }
  void set_recompute(bool on);
  bool recompute() const { return recompute_; }
  // LoRA (lora.h): with adapters attached, every targeted product y = x W^T gets + scale * (x A^T) B^T in each
  // CPU pass (training, log-probs, packed, recompute, the paged rollout forward and the drafter's pass over its
  // int4 base), and the backward accumulates dA, dB into adapters->grads() and adds the adapter path to dx. The
  // adapters are not owned; null detaches. CPU only: refused with a device attached (and attach_device refuses
  // while adapters are attached).
  void attach_lora(LoraAdapters* adapters);
  LoraAdapters* lora() const { return lora_; }
  // Passes without the attached adapters (the base alone: LoRA's KL reference, as PEFT's disable_adapter);
  // see BaseOnly.
  void set_lora_enabled(bool on) { lora_on_ = on; }
  bool lora_enabled() const { return lora_ && lora_on_; }
  // Frozen base: the backward skips the base weights' gradient GEMMs (dW of q/k/v, o, gate/up and down); the
  // input gradients still flow, and the cheap parameter gradients (norms, biases, embedding lookup) and the
  // LM head's (the fused classifier always forms it) are still written into grads(), which stays allocated.
  // Frozen (LoRA): no base weight's gradient is formed (only the input's, for the adapters below); freezing zeroes
  // the gradient buffer and gives its pages back (untouched from then on).
  void set_base_frozen(bool on);
  bool base_frozen() const { return base_frozen_ || base_; }
  // LoRA's base held as bf16 or int4 (frozen_base.h; f32: nothing changes): the block products' current values are
  // taken into a FrozenBase and their f32 values and gradients released (params() and grads() read zeros there from
  // now on, param() refuses them); every CPU pass multiplies by the held values and the base is frozen for good.
  // attach_lora does it for adapters whose config asks for it. CPU only; not undone by detaching the adapters.
  // Completes a base planned by plan_held_base: the products not taken as they were written are taken now. On a
  // base held already in `format`: nothing.
  void hold_base(LoraBase format);
  const FrozenBase* held_base() const { return base_.get(); }  // null until every product is held
  // Before loading or initialising: the block products will be held as `format` (bf16, int4, nf4; f32: nothing), and
  // each is taken into the base and its f32 pages given back as soon as all its values are written (params_written),
  // so the f32 model never exists whole: loading's peak is the held base, the f32 rest and one product's values. The
  // held bytes are hold_base's after a whole load, bit for bit. CPU only.
  void plan_held_base(LoraBase format);
  // The loaders (io::load_hf_weights, io::load_gguf_weights) and init_random: the flat range [offset, offset + n) of
  // params() (one parameter entry, or part of one) holds its final values. With a planned base, a product whose
  // values are all written (a fused qkv: q, k and v) is held now; each value once. Otherwise nothing.
  void params_written(int64_t offset, int64_t n);
  // This model over `from`'s weights, read-only and without a copy: its flat buffer becomes `from`'s (one storage)
  // and it holds `from`'s held base. For a second model of a frozen base (neither writes the weights from now on):
  // the [rl.async] explorer's snapshot under LoRA, where only the adapters train. What is derived from the weights
  // (the bf16 and packed copies, the arena) stays this model's own, made at its next pass. Same config; CPU only.
  void share_weights(const Transformer& from);

  // Reserves the activation arena for batches of up to max_tokens = B*T tokens (and T <= max_seq). With longrope
  // (Phi-3) it also fixes the factors of every later pass, rollouts included, to those HF uses for max_seq.
  void plan(int64_t max_tokens, int64_t max_seq);
  size_t activation_bytes() const { return arena_.capacity(); }
  // What plan(max_tokens, max_seq) would reserve with recompute on or off (equal to activation_bytes() after it),
  // computed from the config alone: nothing is allocated (memory plans for models larger than this machine).
  static size_t activation_bytes_for(const ModelConfig& cfg, int64_t max_tokens, int64_t max_seq, bool recompute);

  // Next-token statistics: row n = (b, t) gets logprob[n] = log p(targets[n] | tokens[b, :t+1]) and
  // the full-vocabulary entropy there. targets -1: no target. forward_backward also accumulates
  // d loss / d params into grads(), where the loss is given per row through `loss`.
  void forward_backward(const int32_t* tokens, const int32_t* targets, int64_t B, int64_t T,
                        const kernels::ClassifierLoss& loss, float* logprob, float* entropy);
  void forward_logprobs(const int32_t* tokens, const int32_t* targets, int64_t B, int64_t T, float* logprob,
                        float* entropy);
  // The same over a packed batch (kernels::AttnSegment): rows that share a prompt hold it once, as a
  // prefix segment their own segments read, and nothing is padded. Row n is token n of the packed
  // array; positions start at 0 in a segment without a prefix and continue after the prefix in one
  // with. Equals forward_backward over the unpacked rows up to rounding (a prefix's gradient is the
  // sum over its readers). CPU only (packed_supported()).
  void forward_backward_packed(const int32_t* tokens, const int32_t* targets,
                               const std::vector<kernels::AttnSegment>& segs, const kernels::ClassifierLoss& loss,
                               float* logprob, float* entropy);
  void forward_logprobs_packed(const int32_t* tokens, const int32_t* targets,
                               const std::vector<kernels::AttnSegment>& segs, float* logprob, float* entropy);
  // With `store` and `slots` (one store slot per packed row): the layers' activations come from the
  // rollout that computed them (ActivationStore) instead of a forward; only the classifier and the
  // backward run. Needs reusable(store).
  void forward_backward_packed(const int32_t* tokens, const int32_t* targets,
                               const std::vector<kernels::AttnSegment>& segs, const kernels::ClassifierLoss& loss,
                               float* logprob, float* entropy, const ActivationStore& store, const int64_t* slots);
  bool packed_supported() const { return !device_; }
  // The fields of one token's activations in an ActivationStore (per layer: the values its backward
  // reads, its lse; then the final residual); whether `store` holds this model's activations at its
  // current weights (and this model can train from them: CPU, no recomputation, no LoRA adapters: their
  // updates do not move params_version()).
  const std::vector<int64_t>& act_field_widths() const { return act_widths_; }
  bool reusable(const ActivationStore& store) const;
  uint64_t params_version() const { return params_version_; }
  void forward_logits(const int32_t* tokens, int64_t B, int64_t T, float* logits);  // [B, T, V]
  void forward_hidden(const int32_t* tokens, int64_t B, int64_t T, float* hidden);  // [B, T, H] after the final norm

  // With a drafter, the block linears run on its 4-bit copy (everything else is this model's):
  // the speculative draft pass, over (and writing into) the same KV cache.
  void forward_paged(const PagedStep& step, KvPool& pool, const Int4Drafter* drafter = nullptr);

 private:
  // ao/mo: the attention's and MLP's outputs before their norms, rstd3/rstd4 those norms' (sandwich norms only).
  struct LayerActs {
    float *x_in, *rstd1, *qkv_pre, *q_rstd, *k_rstd, *qkv, *o, *lse, *x_mid, *rstd2, *gu, *ao, *rstd3, *mo, *rstd4;
  };
  void bind_arena(bool allocate, size_t* bytes);
  void plan_host(int64_t max_tokens, int64_t max_seq);
  void prepare(int64_t B, int64_t T);
  int64_t prepare_packed(const std::vector<kernels::AttnSegment>& segs);  // returns the packed rows
  void backward_from_classifier(const int32_t* tokens, const int32_t* targets, int64_t B, int64_t T,
                                const kernels::ClassifierLoss& loss, float* logprob, float* entropy);
  void trunk_forward(const int32_t* tokens, int64_t B, int64_t T, bool save);
  void backward_rest(const int32_t* tokens, const int32_t* targets, int64_t B, int64_t T,
                     const kernels::ClassifierLoss& loss, float* logprob, float* entropy);
  template <class A, class Fn>
  void each_act_field(A& a, Fn&& f) const;  // f(pointer member, width) per [rows, width] field, lse last
  int64_t act_layer_fields() const;
  LayerActs store_view(ActivationStore& store, int64_t l, int64_t slot) const;
  void store_rows(int64_t l, const PagedStep& st) const;
  // The rows' saved activations from the store: every layer's and the final residual, or (layers false) the
  // final residual only.
  void gather_rows(const ActivationStore& store, const int64_t* slots, int64_t N, bool layers);
  void layer_forward(int64_t l, const LayerActs& a, float* x_out, int64_t B, int64_t T,
                     const PagedStep* paged = nullptr, KvPool* pool = nullptr, const Int4Layer* q4 = nullptr);
  void layer_backward(int64_t l, const LayerActs& a, float* dx, int64_t B, int64_t T);
  void attention_forward(int64_t l, const LayerActs& a, int64_t B, int64_t T, const PagedStep* paged, KvPool* pool);
  void attend_paged(int64_t l, const LayerActs& a, const PagedStep& paged, const KvPool& pool,
                    const kernels::AttnOpts& opt);
  void attention_backward(int64_t l, const LayerActs& a, int64_t B, int64_t T);
  kernels::AttnOpts attn_opts(int64_t l) const;
  const kernels::RopeTable& rope_for(int64_t l) const;
  void select_rope(int64_t max_pos);  // longrope: the long factors past original_max_position (as HF)
  void act_fwd(const float* gu, float* h, int64_t N) const;
  void act_bwd(const float* gu, const float* dh, float* dgu, int64_t N) const;
  // The RMSNorm weight at `offset` as the kernels take it: w, or (1 + w) with norm_offset (Gemma), refreshed
  // with the weights.
  const float* nw(int64_t offset) const;
  void refresh_norm_weights();
  void embed(const int32_t* tokens, int64_t N, float* x);            // the lookup (times sqrt(C) with embed_scale)
  void embed_backward(const int32_t* tokens, int64_t N, float* dx);  // consumes dx
  LayerActs acts_for(int64_t l, bool save) const;
  const uint16_t* w16(int64_t offset) const;  // bf16 copy of a weight (bf16 precision), else null
  const uint16_t* wp(int64_t offset) const;   // its packed bf16 copy (bf16 precision, AVX-512), else null
  const float* wpf(int64_t offset) const;     // its packed f32 copy when current (f32, AVX-512), else null
  struct ForwardWeight {
    int64_t offset, N, K;
  };
  std::vector<ForwardWeight> forward_weights();
  int64_t packed_offset(int64_t offset) const;
  void refresh_bf16();
  void refresh_f32_packed();
  kernels::ClassifierArgs classifier_args(const int32_t* targets, int64_t N, float* logprob, float* entropy);

  void pull_params() const {
    if (host_stale_) pull_params_from_device();
  }
  void pull_params_from_device() const;
  ModelConfig cfg_;
  ParamLayout layout_;
  Tensor params_, grads_;
  std::shared_ptr<DeviceModel> device_;
  mutable bool host_stale_ = false;
  kernels::RopeTable rope_;        // every layer's (Gemma-3: the global layers'; longrope: the short factors)
  kernels::RopeTable rope_long_;   // longrope: the long factors
  kernels::RopeTable rope_local_;  // Gemma-3: the sliding layers' (rope_local_theta, unscaled)
  bool use_long_rope_ = false;     // this pass's sequences reach past original_max_position (longrope)
  int64_t rope_context_ = 0;       // plan()'s longest sequence: longrope's factors for it, in every pass (0: per pass)
  std::vector<std::pair<int64_t, int64_t>> norm_at_;  // norm_offset: (param offset, offset in norm_eff_), sorted
  std::vector<float> norm_eff_;                       // norm_offset: the norms' (1 + w)
  uint64_t norm_version_ = 0;
  std::vector<int64_t> act_widths_;  // act_field_widths(), from the config
  kernels::Precision precision_ = kernels::Precision::f32;
  bool recompute_ = false;
  LoraAdapters* lora_ = nullptr;
  bool lora_on_ = true;
  bool base_frozen_ = false;
  GradSink* grad_sink_ = nullptr;
  void grads_final(size_t range) {
    if (grad_sink_) grad_sink_->grads_final(range);
  }
  std::shared_ptr<const FrozenBase> base_;  // hold_base: the block products' held values (share_weights: shared)
  std::shared_ptr<FrozenBase> holding_;     // plan_held_base: the base being filled (base_ once complete)
  std::vector<int64_t> unwritten_;          // holding_'s weights: values not yet written, by weight
  void take_held(int64_t offset);  // holding_ takes the product at offset from params_ and gives its pages back
  void finish_held_base();
  std::vector<float> lora_ws_;  // the adapters' products' scratch, sized with the arena (lora workspace_floats)
  Tensor params_bf16_;  // bf16 copy of params for bf16 GEMMs, refreshed when params change
  Tensor params_bf16p_;  // the forward weights packed for kernels::gemm_bf16_packed (where supported)
  Tensor params_f32p_;   // and for kernels::gemm_f32_packed (f32 decode, where supported)
  uint64_t f32p_version_ = 0;
  std::vector<std::pair<int64_t, int64_t>> packed_at_;  // (param offset, packed offset), sorted
  int64_t packed_total_ = 0;
  mutable uint64_t params_version_ = 1;
  uint64_t bf16_version_ = 0;

  // Arena and what is carved from it (sized for max_tokens_).
  Arena arena_;
  int64_t max_tokens_ = 0, max_seq_ = 0;
  std::vector<LayerActs> saved_;  // per layer (only x_in is per layer when recomputing)
  LayerActs scratch_acts_{};      // for recompute and forward-only passes
  float *x_final_ = nullptr, *rstd_f_ = nullptr, *xn_ = nullptr, *h_ = nullptr, *dx_ = nullptr, *dxn_ = nullptr,
        *dqkv_ = nullptr, *do_ = nullptr, *dh_ = nullptr, *dgu_ = nullptr, *x_tmp_ = nullptr, *rstd_tmp_ = nullptr;
  int32_t* pos_ = nullptr;
  const std::vector<kernels::AttnSegment>* segs_ = nullptr;  // during a packed pass: its segments
  std::vector<int64_t> kv_len_;  // paged steps: keys each row sees (grows once, then reused)
  std::vector<float> prompt_lse_;    // paged steps: the prompt runs' lse [H, rows of the step] (attend_paged)
  std::vector<float> draft_logits_;  // a drafter head over a vocabulary subset: its rows before the scatter
  void draft_head(const PagedStep& st, const Int4Drafter& drafter);  // forward_paged's LM head for a drafter
  float* classifier_ws_ = nullptr;  // one chunk of logits for the fused classifier
  int64_t classifier_ws_floats_ = 0;
};

// The model's passes without its LoRA adapters for this scope (nothing for a model without them).
class BaseOnly {
 public:
  explicit BaseOnly(Transformer& m) : m_(m), was_(m.lora_enabled()) { m_.set_lora_enabled(false); }
  ~BaseOnly() {
    if (was_) m_.set_lora_enabled(true);
  }
  BaseOnly(const BaseOnly&) = delete;
  BaseOnly& operator=(const BaseOnly&) = delete;

 private:
  Transformer& m_;
  bool was_;
};

}  // namespace temper
