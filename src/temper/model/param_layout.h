// Where every parameter lives in the one flat buffer (params, grads and AdamW moments share it).
// Tensors are named as in Hugging Face state dicts. q/k/v (and their biases) are adjacent so they
// form one fused [Hq*D + 2*Hkv*D, C] matrix; gate/up likewise form [2F, C]: one GEMM each (Phi-3 stores
// them so: qkv_proj, gate_up_proj).
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "temper/core/tensor.h"
#include "temper/model/config.h"

namespace temper {

struct ParamEntry {
  std::string name;  // HF name, e.g. "model.layers.0.self_attn.q_proj.weight"
  Shape shape;
  int64_t offset = 0;  // in floats
  int64_t numel() const { return shape.numel(); }
};

// mlp_norm is the MLP's input norm (Llama's post_attention_layernorm, Gemma's pre_feedforward_layernorm);
// Gemma's norms of the attention and MLP outputs are attn_post_norm and mlp_post_norm (-1 elsewhere).
struct LayerOffsets {
  int64_t attn_norm, w_qkv, b_qkv = -1, q_norm = -1, k_norm = -1, w_o, mlp_norm, w_gu, w_down;
  int64_t attn_post_norm = -1, mlp_post_norm = -1;
};

class ParamLayout {
 public:
  explicit ParamLayout(const ModelConfig& c);
  int64_t total() const { return total_; }
  const std::vector<ParamEntry>& entries() const { return entries_; }
  const ParamEntry* find(const std::string& name) const;  // null if absent
  const ParamEntry& at(const std::string& name) const;    // throws naming the tensor
  // The buffer cut at the layers, as (offset, length) in offset order: the embedding, each layer's parameters, the
  // final norm with an untied LM head (padding goes with the range before it). A backward finishes them last to first
  // (Transformer::GradSink): gradient sharding (ZeRO-2) reduces each as soon as it is final.
  std::vector<std::pair<int64_t, int64_t>> ranges() const;
  int64_t embed = 0, final_norm = 0, lm_head = 0;          // lm_head == embed when tied
  std::vector<LayerOffsets> layers;

 private:
  int64_t add(const std::string& name, Shape shape, bool pad_after = true);
  std::vector<ParamEntry> entries_;
  std::unordered_map<std::string, size_t> index_;
  int64_t total_ = 0;
};

}  // namespace temper
