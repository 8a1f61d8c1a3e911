#include "temper/io/gguf_model.h"

#include <cstring>
#include <vector>

#include "temper/core/error.h"

namespace temper::io {

namespace {

// Per-layer names: HF suffix after "model.layers.N." <-> llama.cpp suffix after "blk.N.".
struct NamePair {
  const char* hf;
  const char* gguf;
};
constexpr NamePair kLayerNames[] = {
    {"input_layernorm.weight", "attn_norm.weight"},
    {"self_attn.q_proj.weight", "attn_q.weight"},
    {"self_attn.k_proj.weight", "attn_k.weight"},
    {"self_attn.v_proj.weight", "attn_v.weight"},
    {"self_attn.q_proj.bias", "attn_q.bias"},
    {"self_attn.k_proj.bias", "attn_k.bias"},
    {"self_attn.v_proj.bias", "attn_v.bias"},
    {"self_attn.o_proj.weight", "attn_output.weight"},
    {"self_attn.q_norm.weight", "attn_q_norm.weight"},
    {"self_attn.k_norm.weight", "attn_k_norm.weight"},
    {"post_attention_layernorm.weight", "ffn_norm.weight"},
    {"mlp.gate_proj.weight", "ffn_gate.weight"},
    {"mlp.up_proj.weight", "ffn_up.weight"},
    {"mlp.down_proj.weight", "ffn_down.weight"},
};
constexpr NamePair kGlobalNames[] = {
    {"model.embed_tokens.weight", "token_embd.weight"},
    {"model.norm.weight", "output_norm.weight"},
    {"lm_head.weight", "output.weight"},
};

// "N.rest" after `prefix` with N a decimal layer index; false if `name` is not of that form.
bool split_layer(const std::string& name, const std::string& prefix, std::string* index, std::string* rest) {
  if (name.compare(0, prefix.size(), prefix) != 0) return false;
  size_t dot = name.find('.', prefix.size());
  if (dot == std::string::npos || dot == prefix.size()) return false;
  for (size_t i = prefix.size(); i < dot; ++i)
    if (name[i] < '0' || name[i] > '9') return false;
  *index = name.substr(prefix.size(), dot - prefix.size());
  *rest = name.substr(dot + 1);
  return true;
}

bool is_q_or_k(const std::string& hf_name) {
  return hf_name.find(".self_attn.q_proj.") != std::string::npos ||
         hf_name.find(".self_attn.k_proj.") != std::string::npos;
}

void permute_rows(float* w, int64_t n_head, int64_t head_dim, int64_t cols, bool to_gguf) {
  TEMPER_CHECK(head_dim % 2 == 0) << "q/k row permutation needs an even head_dim, got " << head_dim;
  const int64_t half = head_dim / 2;
  const size_t row = static_cast<size_t>(cols) * sizeof(float);
  std::vector<float> tmp(static_cast<size_t>(head_dim * cols));
  for (int64_t h = 0; h < n_head; ++h) {
    float* head = w + h * head_dim * cols;
    std::memcpy(tmp.data(), head, tmp.size() * sizeof(float));
    for (int64_t i = 0; i < half; ++i)
      for (int64_t s = 0; s < 2; ++s) {
        const int64_t hf_row = s * half + i, gguf_row = 2 * i + s;
        const int64_t dst = to_gguf ? gguf_row : hf_row, src = to_gguf ? hf_row : gguf_row;
        std::memcpy(head + dst * cols, tmp.data() + src * cols, row);
      }
  }
}

}  // namespace

std::string gguf_arch_name(Arch a) {
  return arch_name(a);
}

Arch gguf_arch_from_name(const std::string& name, const std::string& where) {
  if (name == "llama") return Arch::llama;
  if (name == "qwen2") return Arch::qwen2;
  if (name == "qwen3") return Arch::qwen3;
  TEMPER_FAIL() << where << ": architecture '" << name << "' is not supported (supported: llama, qwen2, qwen3)";
}

bool gguf_arch_permutes_qk(Arch a) {
  return a == Arch::llama;
}

std::string gguf_name_from_hf(const std::string& hf_name) {
  for (const NamePair& p : kGlobalNames)
    if (hf_name == p.hf) return p.gguf;
  std::string idx, rest;
  if (!split_layer(hf_name, "model.layers.", &idx, &rest)) return "";
  for (const NamePair& p : kLayerNames)
    if (rest == p.hf) return "blk." + idx + "." + p.gguf;
  return "";
}

std::string hf_name_from_gguf(const std::string& gguf_name) {
  for (const NamePair& p : kGlobalNames)
    if (gguf_name == p.gguf) return p.hf;
  std::string idx, rest;
  if (!split_layer(gguf_name, "blk.", &idx, &rest)) return "";
  for (const NamePair& p : kLayerNames)
    if (rest == p.gguf) return "model.layers." + idx + "." + p.hf;
  return "";
}

void gguf_permute_qk_rows(float* w, int64_t n_head, int64_t head_dim, int64_t cols) {
  permute_rows(w, n_head, head_dim, cols, true);
}

void gguf_unpermute_qk_rows(float* w, int64_t n_head, int64_t head_dim, int64_t cols) {
  permute_rows(w, n_head, head_dim, cols, false);
}

ModelConfig gguf_model_config(const GgufFile& f) {
  const std::string& an = f.get_str("general.architecture");
  ModelConfig c;
  c.arch = gguf_arch_from_name(an, f.path() + ": general.architecture");
  const std::string p = an + ".";
  auto positive = [&](const std::string& key) -> int64_t {
    uint32_t v = f.get_u32(key);
    TEMPER_CHECK(v > 0) << f.path() << ": metadata key '" << key << "' must be > 0, got " << v;
    return v;
  };
  c.num_layers = positive(p + "block_count");
  c.hidden_size = positive(p + "embedding_length");
  c.intermediate_size = positive(p + "feed_forward_length");
  c.num_heads = positive(p + "attention.head_count");
  c.num_kv_heads = f.has_key(p + "attention.head_count_kv") ? positive(p + "attention.head_count_kv") : c.num_heads;
  c.max_position_embeddings = positive(p + "context_length");
  if (f.has_key(p + "attention.key_length")) {
    c.head_dim = positive(p + "attention.key_length");
  } else {
    TEMPER_CHECK(c.hidden_size % c.num_heads == 0)
        << f.path() << ": " << p << "embedding_length (" << c.hidden_size << ") is not a multiple of " << p
        << "attention.head_count (" << c.num_heads << ") and " << p << "attention.key_length is absent";
    c.head_dim = c.hidden_size / c.num_heads;
  }
  if (f.has_key(p + "attention.value_length")) {
    uint32_t vl = f.get_u32(p + "attention.value_length");
    TEMPER_CHECK(vl == c.head_dim) << f.path() << ": " << p << "attention.value_length is " << vl
                                   << ", expected the key length " << c.head_dim << " (temper has one head_dim)";
  }
  if (f.has_key(p + "rope.dimension_count")) {
    uint32_t rd = f.get_u32(p + "rope.dimension_count");
    TEMPER_CHECK(rd == c.head_dim) << f.path() << ": " << p << "rope.dimension_count is " << rd
                                   << ", expected head_dim " << c.head_dim << " (partial rotary is not supported)";
  }
  if (f.has_key(p + "rope.scaling.type")) {
    const std::string& st = f.get_str(p + "rope.scaling.type");
    TEMPER_CHECK(st == "none") << f.path() << ": " << p << "rope.scaling.type is '" << st
                               << "'; rope scaling is not supported (expected 'none' or absent)";
  }
  if (f.has_key(p + "expert_count")) {
    uint32_t ne = f.get_u32(p + "expert_count");
    TEMPER_CHECK(ne == 0) << f.path() << ": " << p << "expert_count is " << ne
                          << "; mixture-of-experts is not supported";
  }
  c.rope_theta = f.get_f32_or(p + "rope.freq_base", 10000.0f);
  c.rms_norm_eps = f.get_f32(p + "attention.layer_norm_rms_epsilon");

  const GgufTensorInfo& emb = f.tensor("token_embd.weight");
  TEMPER_CHECK(emb.ne.size() == 2 && emb.ne[0] == c.hidden_size)
      << f.path() << ": tensor 'token_embd.weight' has GGUF dims " << Shape(emb.ne).str() << ", expected ["
      << c.hidden_size << ", vocab]";
  c.vocab_size = emb.ne[1];
  if (f.has_key(p + "vocab_size")) {
    uint32_t v = f.get_u32(p + "vocab_size");
    TEMPER_CHECK(v == c.vocab_size) << f.path() << ": " << p << "vocab_size is " << v << " but token_embd.weight has "
                                    << c.vocab_size << " rows";
  }
  c.tie_word_embeddings = !f.has_tensor("output.weight");
  c.qkv_bias = c.arch == Arch::qwen2;
  c.qk_norm = c.arch == Arch::qwen3;
  c.validate(f.path());
  return c;
}

void load_gguf_weights(Transformer& model, const GgufFile& f) {
  const ModelConfig& c = model.config();
  const ParamLayout& layout = model.layout();
  for (const GgufTensorInfo& t : f.tensors()) {
    std::string hf = hf_name_from_gguf(t.name);
    TEMPER_CHECK(!hf.empty()) << f.path() << ": tensor '" << t.name
                              << "' has no Hugging Face counterpart temper knows (a different architecture, or "
                                 "rope_freqs for rope scaling, which is not supported)";
    TEMPER_CHECK(layout.find(hf) != nullptr)
        << f.path() << ": tensor '" << t.name << "' ('" << hf
        << "') is not a parameter of the model the config describes (" << c.summary() << ")";
  }
  const bool permuted = gguf_arch_permutes_qk(c.arch);
  for (const ParamEntry& e : layout.entries()) {
    const std::string g = gguf_name_from_hf(e.name);
    const GgufTensorInfo* t = f.find_tensor(g);
    TEMPER_CHECK(t != nullptr) << f.path() << ": missing tensor '" << g << "' ('" << e.name << "'; model "
                               << c.summary() << ")";
    TEMPER_CHECK(t->shape() == e.shape) << f.path() << ": tensor '" << g << "' ('" << e.name << "') has shape "
                                        << t->shape().str() << " (GGUF dims " << Shape(t->ne).str()
                                        << "), the config implies " << e.shape.str();
    float* dst = model.params() + e.offset;
    f.dequantize_into(g, dst, e.numel());
    if (permuted && is_q_or_k(e.name)) {
      const bool is_q = e.name.find(".q_proj.") != std::string::npos;
      const int64_t cols = e.shape.rank() == 2 ? e.shape[1] : 1;
      gguf_unpermute_qk_rows(dst, is_q ? c.num_heads : c.num_kv_heads, c.head_dim, cols);
    }
  }
  model.params_updated();
}

}  // namespace temper::io
