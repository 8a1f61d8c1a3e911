#include "temper/model/param_layout.h"

#include "temper/core/error.h"

namespace temper {

int64_t ParamLayout::add(const std::string& name, Shape shape, bool pad_after) {
  int64_t off = total_;
  index_[name] = entries_.size();
  entries_.push_back({name, shape, off});
  total_ += shape.numel();
  if (pad_after) total_ = (total_ + 15) / 16 * 16;  // 64-byte aligned groups
  return off;
}

ParamLayout::ParamLayout(const ModelConfig& c) {
  const int64_t C = c.hidden_size, D = c.head_dim, Hq = c.num_heads * D, Hk = c.num_kv_heads * D,
                F = c.intermediate_size, V = c.vocab_size;
  embed = add("model.embed_tokens.weight", {V, C});
  for (int64_t l = 0; l < c.num_layers; ++l) {
    std::string p = "model.layers." + std::to_string(l) + ".";
    LayerOffsets o{};
    o.attn_norm = add(p + "input_layernorm.weight", {C});
    if (c.fused_proj) {
      o.w_qkv = add(p + "self_attn.qkv_proj.weight", {c.qkv_dim(), C});
    } else {
      o.w_qkv = add(p + "self_attn.q_proj.weight", {Hq, C}, false);
      add(p + "self_attn.k_proj.weight", {Hk, C}, false);
      add(p + "self_attn.v_proj.weight", {Hk, C});
    }
    if (c.qkv_bias) {
      o.b_qkv = add(p + "self_attn.q_proj.bias", {Hq}, false);
      add(p + "self_attn.k_proj.bias", {Hk}, false);
      add(p + "self_attn.v_proj.bias", {Hk});
    }
    if (c.qk_norm) {
      o.q_norm = add(p + "self_attn.q_norm.weight", {D});
      o.k_norm = add(p + "self_attn.k_norm.weight", {D});
    }
    o.w_o = add(p + "self_attn.o_proj.weight", {C, Hq});
    if (c.sandwich_norm) {
      o.attn_post_norm = add(p + "post_attention_layernorm.weight", {C});
      o.mlp_norm = add(p + "pre_feedforward_layernorm.weight", {C});
    } else {
      o.mlp_norm = add(p + "post_attention_layernorm.weight", {C});
    }
    if (c.fused_proj) {
      o.w_gu = add(p + "mlp.gate_up_proj.weight", {2 * F, C});
    } else {
      o.w_gu = add(p + "mlp.gate_proj.weight", {F, C}, false);
      add(p + "mlp.up_proj.weight", {F, C});
    }
    o.w_down = add(p + "mlp.down_proj.weight", {C, F});
    if (c.sandwich_norm) o.mlp_post_norm = add(p + "post_feedforward_layernorm.weight", {C});
    layers.push_back(o);
  }
  final_norm = add("model.norm.weight", {C});
  lm_head = c.tie_word_embeddings ? embed : add("lm_head.weight", {V, C});
}

std::vector<std::pair<int64_t, int64_t>> ParamLayout::ranges() const {
  std::vector<int64_t> cuts = {0};
  for (const LayerOffsets& o : layers) cuts.push_back(o.attn_norm);
  cuts.push_back(final_norm);
  cuts.push_back(total_);
  std::vector<std::pair<int64_t, int64_t>> out;
  for (size_t i = 0; i + 1 < cuts.size(); ++i) out.emplace_back(cuts[i], cuts[i + 1] - cuts[i]);
  return out;
}

const ParamEntry* ParamLayout::find(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &entries_[it->second];
}

const ParamEntry& ParamLayout::at(const std::string& name) const {
  const ParamEntry* e = find(name);
  TEMPER_CHECK(e != nullptr) << "model has no parameter named '" << name << "'";
  return *e;
}

}  // namespace temper
