#include "temper/io/gguf_model.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "temper/core/error.h"

namespace temper::io {

namespace {

// Per-layer names: HF suffix after "model.layers.N." <-> llama.cpp suffix after "blk.N.". The common ones, then
// the MLP's input norm of Llama-style layers, Gemma's four norms, Phi-3's fused projections.
struct NamePair {
  const char* hf;
  const char* gguf;
};
constexpr NamePair kLayerNames[] = {
    {"input_layernorm.weight", "attn_norm.weight"},    {"self_attn.q_proj.weight", "attn_q.weight"},
    {"self_attn.k_proj.weight", "attn_k.weight"},      {"self_attn.v_proj.weight", "attn_v.weight"},
    {"self_attn.q_proj.bias", "attn_q.bias"},          {"self_attn.k_proj.bias", "attn_k.bias"},
    {"self_attn.v_proj.bias", "attn_v.bias"},          {"self_attn.o_proj.weight", "attn_output.weight"},
    {"self_attn.q_norm.weight", "attn_q_norm.weight"}, {"self_attn.k_norm.weight", "attn_k_norm.weight"},
    {"mlp.gate_proj.weight", "ffn_gate.weight"},       {"mlp.up_proj.weight", "ffn_up.weight"},
    {"mlp.down_proj.weight", "ffn_down.weight"},
};
constexpr NamePair kLlamaNormNames[] = {{"post_attention_layernorm.weight", "ffn_norm.weight"}};
constexpr NamePair kGemmaNormNames[] = {
    {"post_attention_layernorm.weight", "post_attention_norm.weight"},
    {"pre_feedforward_layernorm.weight", "ffn_norm.weight"},
    {"post_feedforward_layernorm.weight", "post_ffw_norm.weight"},
};
constexpr NamePair kPhi3Names[] = {
    {"post_attention_layernorm.weight", "ffn_norm.weight"},
    {"self_attn.qkv_proj.weight", "attn_qkv.weight"},
    {"mlp.gate_up_proj.weight", "ffn_up.weight"},
};

bool is_gemma(Arch a) {
  return a == Arch::gemma2 || a == Arch::gemma3;
}

// The arch's own pairs are searched first (Phi-3's fused ffn_up before the common up_proj).
template <class Fn>
bool each_layer_name(Arch a, Fn&& fn) {
  auto scan = [&](const auto& table) {
    for (const NamePair& p : table)
      if (fn(p)) return true;
    return false;
  };
  if (a == Arch::phi3 ? scan(kPhi3Names) : is_gemma(a) ? scan(kGemmaNormNames) : scan(kLlamaNormNames)) return true;
  return scan(kLayerNames);
}
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
  return a == Arch::mistral ? "llama" : arch_name(a);  // llama.cpp converts Mistral as llama
}

Arch gguf_arch_from_name(const std::string& name, const std::string& where) {
  for (Arch a : {Arch::llama, Arch::qwen2, Arch::qwen3, Arch::gemma2, Arch::gemma3, Arch::phi3})
    if (name == arch_name(a)) return a;
  TEMPER_FAIL() << where << ": architecture '" << name
                << "' is not supported (supported: llama, qwen2, qwen3, gemma2, gemma3, phi3)";
}

bool gguf_arch_permutes_qk(Arch a) {
  return a == Arch::llama || a == Arch::mistral;
}

bool gguf_arch_shifts_norms(Arch a) {
  return is_gemma(a);
}

std::string gguf_name_from_hf(const std::string& hf_name, Arch arch) {
  for (const NamePair& p : kGlobalNames)
    if (hf_name == p.hf) return p.gguf;
  std::string idx, rest, out;
  if (!split_layer(hf_name, "model.layers.", &idx, &rest)) return "";
  each_layer_name(arch, [&](const NamePair& p) {
    if (rest != p.hf) return false;
    out = "blk." + idx + "." + p.gguf;
    return true;
  });
  return out;
}

std::string hf_name_from_gguf(const std::string& gguf_name, Arch arch) {
  for (const NamePair& p : kGlobalNames)
    if (gguf_name == p.gguf) return p.hf;
  std::string idx, rest, out;
  if (!split_layer(gguf_name, "blk.", &idx, &rest)) return "";
  each_layer_name(arch, [&](const NamePair& p) {
    if (rest != p.gguf) return false;
    out = "model.layers." + idx + "." + p.hf;
    return true;
  });
  return out;
}

void gguf_permute_qk_rows(float* w, int64_t n_head, int64_t head_dim, int64_t cols) {
  permute_rows(w, n_head, head_dim, cols, true);
}

void gguf_unpermute_qk_rows(float* w, int64_t n_head, int64_t head_dim, int64_t cols) {
  permute_rows(w, n_head, head_dim, cols, false);
}

namespace {

// The tensors that carry RoPE scaling rather than parameters (llama.cpp's rope_freqs for Llama-3.x, Phi-3's
// long/short factors).
bool is_rope_tensor(const std::string& name) {
  return name == "rope_freqs.weight" || name == "rope_factors_long.weight" || name == "rope_factors_short.weight";
}

std::vector<double> rope_tensor(const GgufFile& f, const std::string& name, int64_t half) {
  const GgufTensorInfo& t = f.tensor(name);
  TEMPER_CHECK(t.shape().numel() == half) << f.path() << ": tensor '" << name << "' has " << t.shape().numel()
                                          << " values, expected head_dim / 2 = " << half;
  std::vector<float> v(static_cast<size_t>(half));
  f.dequantize_into(name, v.data(), half);
  return {v.begin(), v.end()};
}

// llama.cpp stores Llama-3.x's rope_scaling "llama3" as rope_freqs (a divisor per frequency). All Llama-3.x use
// low_freq_factor 1 and high_freq_factor 4; the factor is the largest divisor and original_max_position follows
// from a smoothed one. The parameters found must give back every divisor, else the file is refused.
kernels::RopeScaling llama3_from_freq_factors(const GgufFile& f, const ModelConfig& c, const std::vector<double>& ff) {
  kernels::RopeScaling r;
  r.type = kernels::RopeScaling::Type::llama3;
  r.low_freq_factor = 1.0;
  r.high_freq_factor = 4.0;
  r.factor = *std::max_element(ff.begin(), ff.end());
  const int64_t D = c.head_dim;
  auto wavelen = [&](size_t i) { return 2 * M_PI * std::pow(c.rope_theta, 2.0 * static_cast<double>(i) / D); };
  r.original_max_position = 8192;  // Llama-3.1's; replaced by the smoothed band's when there is one
  for (size_t i = 0; i < ff.size(); ++i)
    if (ff[i] > 1.0 + 1e-6 && ff[i] < r.factor - 1e-6) {  // 1/f = (1 - s)/factor + s, s = (orig/wavelen - 1)/3
      const double smooth = (1.0 / ff[i] - 1.0 / r.factor) / (1.0 - 1.0 / r.factor);
      r.original_max_position = std::llround((3.0 * smooth + 1.0) * wavelen(i));
      break;
    }
  float unused = 1.f;
  const std::vector<float> base = kernels::rope_inv_freq(D, c.rope_theta, {}, &unused);
  const std::vector<float> got = kernels::rope_inv_freq(D, c.rope_theta, r, &unused);
  for (size_t i = 0; i < ff.size(); ++i)
    TEMPER_CHECK(std::fabs(base[i] / got[i] / ff[i] - 1.0) < 1e-3)
        << f.path() << ": tensor 'rope_freqs.weight' is not Llama-3's rope scaling (divisor " << ff[i] << " at " << i
        << "; llama3 with factor " << r.factor << ", original " << r.original_max_position << " gives "
        << base[i] / got[i] << ")";
  return r;
}

// {arch}.rope.*: linear scaling, Llama-3's freq factors, Phi-3's longrope; other scaling types are refused.
void read_rope_scaling(const GgufFile& f, const std::string& p, ModelConfig& c) {
  using T = kernels::RopeScaling::Type;
  const std::string type = f.has_key(p + "rope.scaling.type") ? f.get_str(p + "rope.scaling.type") : "";
  const int64_t half = c.head_dim / 2;
  if (f.has_tensor("rope_factors_long.weight")) {  // Phi-3
    kernels::RopeScaling& r = c.rope_scaling;
    r.type = T::longrope;
    r.long_factor = rope_tensor(f, "rope_factors_long.weight", half);
    r.short_factor = rope_tensor(f, "rope_factors_short.weight", half);
    r.original_max_position = f.get_u32(p + "rope.scaling.original_context_length");
    r.factor = static_cast<double>(c.max_position_embeddings) / static_cast<double>(r.original_max_position);
    r.attention_factor = f.get_f32_or(p + "rope.scaling.attn_factor", 0.0f);
  } else if (f.has_tensor("rope_freqs.weight")) {
    c.rope_scaling = llama3_from_freq_factors(f, c, rope_tensor(f, "rope_freqs.weight", half));
  } else if (type == "linear") {
    c.rope_scaling.type = T::linear;
    c.rope_scaling.factor = f.get_f32(p + "rope.scaling.factor");
  } else {
    TEMPER_CHECK(type.empty() || type == "none") << f.path() << ": " << p << "rope.scaling.type is '" << type
                                                 << "'; supported: linear, llama3 (rope_freqs), longrope (Phi-3)";
  }
}

// Gemma-2/3: the layer's features, soft-caps and windows from llama.cpp's keys. The attention scale
// (query_pre_attn_scalar) is head_dim except on the 27B models (hidden / heads), as llama.cpp decides; temper's
// own files carry it as {arch}.attention.query_pre_attn_scalar.
void read_gemma(const GgufFile& f, const std::string& p, ModelConfig& c) {
  const bool is_27b = c.num_layers == (c.arch == Arch::gemma2 ? 46 : 62);
  c.query_pre_attn_scalar = f.get_f32_or(p + "attention.query_pre_attn_scalar",
                                         static_cast<float>(is_27b ? c.hidden_size / c.num_heads : c.head_dim));
  c.sliding_window = f.get_u32_or(p + "attention.sliding_window", 0);
  c.final_softcap = f.get_f32_or(p + "final_logit_softcapping", 0.0f);
  if (c.arch == Arch::gemma2) {
    c.attn_softcap = f.get_f32_or(p + "attn_logit_softcapping", 0.0f);
  } else {
    c.sliding_pattern = f.get_u32_or(p + "attention.sliding_window_pattern", c.sliding_pattern);
    c.rope_local_theta = f.get_f32_or(p + "rope.freq_base_swa", 10000.0f);
  }
}

// The shape: layers, widths, heads, context, vocabulary (token_embd's rows).
void read_shape(const GgufFile& f, const std::string& p, ModelConfig& c) {
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
  if (f.has_key(p + "expert_count")) {
    uint32_t ne = f.get_u32(p + "expert_count");
    TEMPER_CHECK(ne == 0) << f.path() << ": " << p << "expert_count is " << ne
                          << "; mixture-of-experts is not supported";
  }
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
}

}  // namespace

ModelConfig gguf_model_config(const GgufFile& f) {
  const std::string& an = f.get_str("general.architecture");
  ModelConfig c;
  c.arch = gguf_arch_from_name(an, f.path() + ": general.architecture");
  const std::string p = an + ".";
  read_shape(f, p, c);
  c.rope_theta = f.get_f32_or(p + "rope.freq_base", 10000.0f);
  c.rms_norm_eps = f.get_f32(p + "attention.layer_norm_rms_epsilon");
  c.tie_word_embeddings = !f.has_tensor("output.weight");
  apply_arch_features(c);
  if (is_gemma(c.arch)) read_gemma(f, p, c);
  if (c.arch == Arch::llama || c.arch == Arch::phi3) {
    // llama.cpp's llama arch has no window (Mistral v0.1's is dropped by its converter); temper writes the key.
    c.sliding_window = f.get_u32_or(p + "attention.sliding_window", 0);
    if (c.arch == Arch::llama && c.sliding_window > 0) c.arch = Arch::mistral;
  }
  read_rope_scaling(f, p, c);
  c.validate(f.path(), p);  // the sizes bounded, named by their metadata keys
  return c;
}

void load_gguf_weights(Transformer& model, const GgufFile& f) {
  const ModelConfig& c = model.config();
  const ParamLayout& layout = model.layout();
  for (const GgufTensorInfo& t : f.tensors()) {
    if (is_rope_tensor(t.name)) continue;  // read into the config
    std::string hf = hf_name_from_gguf(t.name, c.arch);
    TEMPER_CHECK(!hf.empty()) << f.path() << ": tensor '" << t.name
                              << "' has no Hugging Face counterpart temper knows (a different architecture)";
    TEMPER_CHECK(layout.find(hf) != nullptr)
        << f.path() << ": tensor '" << t.name << "' ('" << hf
        << "') is not a parameter of the model the config describes (" << c.summary() << ")";
  }
  const bool permuted = gguf_arch_permutes_qk(c.arch), shifted = gguf_arch_shifts_norms(c.arch);
  for (const ParamEntry& e : layout.entries()) {
    const std::string g = gguf_name_from_hf(e.name, c.arch);
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
    if (shifted && gguf_is_norm(e.name))  // llama.cpp stores Gemma's norms as 1 + w
      for (int64_t i = 0; i < e.numel(); ++i) dst[i] -= 1.0f;
    f.release(g);                               // the file's pages of it: read once
    model.params_written(e.offset, e.numel());  // its final values (un-permuted, shifted): a held base takes them
  }
  model.params_updated();
}

bool gguf_is_norm(const std::string& hf_name) {
  return hf_name.size() > 11 && hf_name.compare(hf_name.size() - 11, 11, "norm.weight") == 0;
}

}  // namespace temper::io
