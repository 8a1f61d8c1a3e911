// LoRA adapters (Hu et al., "LoRA: Low-Rank Adaptation of Large Language Models", 2021) for the decoder's linear
// products: a targeted y = x W^T becomes y = x W^T + scale * (x A^T) B^T with A [r, in], B [out, r], scale =
// alpha / r (rsLoRA: alpha / sqrt(r)). Initialised as PEFT's LoraLayer.reset_lora_parameters: A kaiming-uniform
// (a = sqrt(5)), that is U(-1/sqrt(in), 1/sqrt(in)), and B zeros, so a fresh adapter leaves the model unchanged.
// Every A and B lives in one flat f32 buffer with a flat gradient buffer beside it (an optimiser steps them as it
// steps the model's parameters). The frozen base the adapters sit on: f32 (the model's own weights), bf16, int4 or
// nf4 (QLoRA, Dettmers et al. 2023: the block products held only in 4 bits, dequantised in the product;
// frozen_base.h). Leaves out: dropout (0 only), DoRA, per-layer ranks, adapters on embeddings, double quantisation.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "temper/core/settings.h"
#include "temper/core/tensor.h"
#include "temper/model/config.h"

namespace temper {

class Transformer;

// The products an adapter can target, by their recipe names (q, k, v, o, gate, up, down).
enum class LoraTarget { q, k, v, o, gate, up, down };
inline constexpr int kLoraTargetCount = 7;
std::string_view lora_target_name(LoraTarget t);    // "q", ..., "down"
std::string_view lora_target_module(LoraTarget t);  // the HF module: "self_attn.q_proj", ..., "mlp.down_proj"
// Accepts the recipe name ("q") or the HF module's last name ("q_proj").
bool lora_target_from_name(std::string_view name, LoraTarget* out);

// How the frozen base's block products (q/k/v, o, gate/up, down of every layer) are held under the adapters.
enum class LoraBase { f32, bf16, int4, nf4 };
inline constexpr EnumNames<LoraBase, 4> kLoraBaseNames{
    {{LoraBase::f32, "f32"}, {LoraBase::bf16, "bf16"}, {LoraBase::int4, "int4"}, {LoraBase::nf4, "nf4"}}};
std::string_view lora_base_name(LoraBase b);  // "f32", "bf16", "int4", "nf4"
bool lora_base_from_name(std::string_view name, LoraBase* out);

struct LoraConfig {
  int64_t rank = 16;
  double alpha = 32;
  double dropout = 0;  // only 0 so far (validate refuses others)
  std::vector<LoraTarget> targets{LoraTarget::q, LoraTarget::k, LoraTarget::v, LoraTarget::o};
  bool use_rslora = false;  // scale alpha / sqrt(r) instead of alpha / r (Kalajdzievski, 2023)
  // The base under the adapters: f32 keeps the model's weights (and their gradient buffer); bf16, int4, nf4 hold the
  // block products only in that format (Transformer::hold_base, done by attach_lora), no f32 copy, no gradients.
  LoraBase base = LoraBase::f32;

  // Throws naming `where` (e.g. "recipe [lora]") and the field.
  void validate(const std::string& where = "lora") const;
  double scale() const;
  bool has(LoraTarget t) const;
};

// The products grouped by the input they read (one stacked A each): q/k/v read the attention norm's output,
// o the attention output, gate/up the MLP norm's output, down the activation.
enum class LoraGroup { qkv, o, gate_up, down };
inline constexpr int kLoraGroupCount = 4;

// One target's adapter in one layer. row0: its first row in the model's (fused) weight and column in the fused
// output (q 0, k Hq, v Hq + Hk; gate 0, up F; o and down 0).
struct LoraProduct {
  LoraTarget target = LoraTarget::q;
  int64_t in = 0, out = 0, row0 = 0;
  int64_t a = 0, b = 0;  // offsets (floats) of A [r, in] and B [out, r] in the flat buffers
};

struct LoraGroupSlots {
  int64_t in = 0;
  int64_t a = -1;                     // the targets' A one after another: a stacked [n * r, in] at this offset
  std::vector<LoraProduct> products;  // the targeted ones, in target order (empty: nothing targeted)
};

class LoraAdapters {
 public:
  LoraAdapters(const ModelConfig& model, const LoraConfig& cfg);

  const LoraConfig& config() const { return cfg_; }
  // The base format the adapters ask for (attach_lora holds the model's base so); adapters read from a PEFT
  // directory say f32 until told (the recipe's [lora] base).
  void set_base(LoraBase b) { cfg_.base = b; }
  const ModelConfig& model_config() const { return model_; }
  int64_t rank() const { return cfg_.rank; }
  float scale() const { return scale_; }
  int64_t size() const { return total_; }  // floats in params() (and grads())
  int64_t num_params() const { return total_; }
  float* params() { return params_.data<float>(); }
  const float* params() const { return params_.data<float>(); }
  float* grads() { return grads_.data<float>(); }
  const float* grads() const { return grads_.data<float>(); }
  void zero_grad() { grads_.fill_zero(); }
  // PEFT's init: A ~ U(-1/sqrt(in), 1/sqrt(in)) from (seed, one stream per adapter), B = 0.
  void init(uint64_t seed);

  const LoraGroupSlots& group(int64_t layer, LoraGroup g) const;
  const LoraProduct* find(int64_t layer, LoraTarget t) const;  // null when t is not targeted
  // Views of one adapter's matrices (throws naming the layer and target when it is not targeted).
  Tensor a(int64_t layer, LoraTarget t) const;
  Tensor b(int64_t layer, LoraTarget t) const;
  Tensor grad_a(int64_t layer, LoraTarget t) const;
  Tensor grad_b(int64_t layer, LoraTarget t) const;

  // The group's adapter path added to its product's output: for each target y[:, row0 : row0 + out] +=
  // scale * (x A^T) B^T. x [N, in], y [N, ldy]; ws: workspace_floats(N) floats. f32 whatever the model's precision.
  void forward(int64_t layer, LoraGroup g, const float* x, int64_t N, float* y, int64_t ldy, float* ws) const;
  // With dy [N, ldy] the gradient at the group's output: dB += scale dy^T (x A^T), dA += scale (dy B)^T x into
  // grads(), and dx [N, in] += scale (dy B) A (the adapter path's share of the input's gradient).
  void backward(int64_t layer, LoraGroup g, const float* x, const float* dy, int64_t ldy, int64_t N, float* dx,
                float* ws);
  int64_t workspace_floats(int64_t N) const { return 2 * N * 3 * cfg_.rank; }  // u and du of up to 3 targets

  // W += scale * B A for every adapter: the model alone then computes what model + adapters did.
  void merge_into(Transformer& model) const;

 private:
  const LoraProduct& at(int64_t layer, LoraTarget t) const;
  ModelConfig model_;
  LoraConfig cfg_;
  float scale_ = 1.f;
  std::vector<LoraGroupSlots> groups_;  // [layer * kLoraGroupCount + group]
  int64_t total_ = 0;
  Tensor params_, grads_;
};

}  // namespace temper
