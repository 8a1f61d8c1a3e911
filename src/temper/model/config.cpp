#include "temper/model/config.h"

#include <cmath>
#include <sstream>

#include "temper/core/error.h"
#include "temper/core/settings.h"

namespace temper {

std::string arch_name(Arch a) {
  switch (a) {
    case Arch::llama: return "llama";
    case Arch::qwen2: return "qwen2";
    case Arch::qwen3: return "qwen3";
    case Arch::mistral:
      return "mistral";
    case Arch::gemma2:
      return "gemma2";
    case Arch::gemma3:
      return "gemma3";
    case Arch::phi3:
      return "phi3";
  }
  return "?";
}

void ModelConfig::validate(const std::string& where, const std::string& gguf_prefix) const {
  // Each size as its source names it (config.json's field, or the GGUF metadata key), within 1..max.
  auto bounded = [&](const char* field, const char* gguf_key, int64_t v, int64_t max) {
    const std::string name = gguf_prefix.empty() ? field : gguf_prefix + gguf_key;
    TEMPER_CHECK(v >= 1 && v <= max) << where << ": " << name << " = " << v << ": expected 1 to " << max
                                     << (v > max ? " (the largest temper accepts)" : "");
  };
  bounded("vocab_size", "vocab_size", vocab_size, kMaxVocab);
  bounded("hidden_size", "embedding_length", hidden_size, kMaxHidden);
  bounded("num_hidden_layers", "block_count", num_layers, kMaxLayers);
  bounded("num_attention_heads", "attention.head_count", num_heads, kMaxHeads);
  bounded("num_key_value_heads", "attention.head_count_kv", num_kv_heads, kMaxHeads);
  bounded("head_dim", "attention.key_length", head_dim, kMaxHeadDim);
  bounded("intermediate_size", "feed_forward_length", intermediate_size, kMaxIntermediate);
  bounded("max_position_embeddings", "context_length", max_position_embeddings, kMaxPositions);
  const double params = param_count();
  TEMPER_CHECK(params <= kMaxParams) << where << ": " << summary() << " has " << params
                                     << " parameters: expected at most " << kMaxParams
                                     << " (the largest temper accepts)";
  TEMPER_CHECK(num_heads % num_kv_heads == 0)
      << where << ": num_attention_heads (" << num_heads << ") must be a multiple of num_key_value_heads ("
      << num_kv_heads << ")";
  TEMPER_CHECK(head_dim % 2 == 0) << where << ": head_dim must be even for RoPE, got " << head_dim;
  TEMPER_CHECK(rope_theta > 0) << where << ": rope_theta must be > 0, got " << rope_theta;
  TEMPER_CHECK(rms_norm_eps > 0 && rms_norm_eps < 1) << where << ": rms_norm_eps must be in (0, 1), got " << rms_norm_eps;
  TEMPER_CHECK(query_pre_attn_scalar >= 0 && std::isfinite(query_pre_attn_scalar))
      << where << ": query_pre_attn_scalar must be a positive number, got " << query_pre_attn_scalar;
  TEMPER_CHECK(attn_softcap >= 0 && std::isfinite(attn_softcap))
      << where << ": attn_logit_softcapping must be a positive number or null, got " << attn_softcap;
  TEMPER_CHECK(final_softcap >= 0 && std::isfinite(final_softcap))
      << where << ": final_logit_softcapping must be a positive number or null, got " << final_softcap;
  TEMPER_CHECK(sliding_window >= 0) << where << ": sliding_window must be a positive integer or null, got "
                                    << sliding_window;
  TEMPER_CHECK(sliding_pattern >= 0) << where << ": sliding_window_pattern must be a positive integer, got "
                                     << sliding_pattern;
  TEMPER_CHECK(rope_local_theta >= 0) << where << ": rope_local_base_freq must be > 0, got " << rope_local_theta;
  TEMPER_CHECK(pad_token_id < vocab_size)
      << where << ": pad_token_id " << pad_token_id << " is outside the vocabulary (" << vocab_size << " tokens)";
}

double ModelConfig::param_count() const {
  const double C = static_cast<double>(hidden_size), F = static_cast<double>(intermediate_size),
               V = static_cast<double>(vocab_size), D = static_cast<double>(head_dim),
               Hq = static_cast<double>(num_heads) * D, QKV = static_cast<double>(num_heads + 2 * num_kv_heads) * D;
  double layer = C * QKV + Hq * C + 3 * C * F + (sandwich_norm ? 4 : 2) * C;
  if (qkv_bias) layer += QKV;
  if (qk_norm) layer += 2 * D;
  return static_cast<double>(num_layers) * layer + V * C * (tie_word_embeddings ? 1 : 2) + C;
}

float ModelConfig::attn_scale() const {
  return static_cast<float>(
      1.0 / std::sqrt(query_pre_attn_scalar > 0 ? query_pre_attn_scalar : static_cast<double>(head_dim)));
}

namespace {
std::string rope_phrase(const kernels::RopeScaling& r) {
  using T = kernels::RopeScaling::Type;
  std::ostringstream s;
  switch (r.type) {
    case T::none:
      return "";
    case T::linear:
      s << "RoPE scaling linear x" << r.factor;
      break;
    case T::llama3:
      s << "RoPE scaling llama3 x" << r.factor << " (original " << r.original_max_position << ")";
      break;
    case T::longrope:
      s << "RoPE scaling longrope (original " << r.original_max_position << ")";
      break;
  }
  return s.str();
}
}  // namespace

std::vector<std::string> ModelConfig::features() const {
  std::vector<std::string> f;
  auto num = [](double v) {
    std::ostringstream s;
    s << v;
    return s.str();
  };
  if (tie_word_embeddings) f.push_back("tied embeddings");
  if (qkv_bias) f.push_back("q/k/v biases");
  if (qk_norm) f.push_back("q/k RMSNorm");
  if (act == Activation::gelu_tanh) f.push_back("GeGLU (tanh GELU)");
  if (norm_offset) f.push_back("RMSNorm (1 + w)");
  if (embed_scale) f.push_back("embeddings x sqrt(hidden_size)");
  if (sandwich_norm) f.push_back("norms after attention and MLP");
  if (fused_proj) f.push_back("fused qkv_proj and gate_up_proj");
  if (query_pre_attn_scalar > 0) f.push_back("attention scale query_pre_attn_scalar^-1/2 = " + num(attn_scale()));
  if (attn_softcap > 0) f.push_back("attention soft-cap " + num(attn_softcap));
  if (final_softcap > 0) f.push_back("final logit soft-cap " + num(final_softcap));
  if (sliding_window > 0) {
    int64_t n = 0;
    for (int64_t l = 0; l < num_layers; ++l) n += slides(l) ? 1 : 0;
    f.push_back("sliding window " + std::to_string(sliding_window) + " on " + std::to_string(n) + " of " +
                std::to_string(num_layers) + " layers");
  }
  if (rope_local_theta > 0) f.push_back("local layers' RoPE base " + num(rope_local_theta));
  if (std::string r = rope_phrase(rope_scaling); !r.empty()) f.push_back(r);
  if (pad_token_id >= 0) f.push_back("padding_idx " + std::to_string(pad_token_id));
  return f;
}

std::string ModelConfig::summary() const {
  std::ostringstream s;
  s << arch_name(arch) << " L=" << num_layers << " C=" << hidden_size << " H=" << num_heads << " Hkv=" << num_kv_heads
    << " D=" << head_dim << " F=" << intermediate_size << " V=" << vocab_size << (tie_word_embeddings ? " tied" : "")
    << (qkv_bias ? " qkv_bias" : "") << (qk_norm ? " qk_norm" : "") << (sliding_window > 0 ? " swa" : "")
    << (attn_softcap > 0 || final_softcap > 0 ? " softcap" : "")
    << (rope_scaling.type != kernels::RopeScaling::Type::none ? " rope_scaled" : "");
  return s.str();
}

void apply_arch_features(ModelConfig& c) {
  const bool gemma = c.arch == Arch::gemma2 || c.arch == Arch::gemma3;
  c.qkv_bias = c.arch == Arch::qwen2;
  c.qk_norm = c.arch == Arch::qwen3 || c.arch == Arch::gemma3;
  c.fused_proj = c.arch == Arch::phi3;
  c.act = gemma ? Activation::gelu_tanh : Activation::silu;
  c.norm_offset = c.embed_scale = c.sandwich_norm = gemma;
  if (gemma) c.sliding_pattern = c.arch == Arch::gemma2 ? 2 : 6;
}

namespace {

// The fields every preset sets (head_dim explicit), with the family's features.
ModelConfig shape(Arch arch, int64_t V, int64_t C, int64_t L, int64_t H, int64_t Hkv, int64_t D, int64_t F, int64_t ctx,
                  double theta, double eps, bool tied) {
  ModelConfig c;
  c.arch = arch;
  c.vocab_size = V;
  c.hidden_size = C;
  c.num_layers = L;
  c.num_heads = H;
  c.num_kv_heads = Hkv;
  c.head_dim = D;
  c.intermediate_size = F;
  c.max_position_embeddings = ctx;
  c.rope_theta = theta;
  c.rms_norm_eps = eps;
  c.tie_word_embeddings = tied;
  apply_arch_features(c);
  return c;
}

ModelConfig quickstart() {  // temper train's built-in tiny model (byte-level vocabulary + 3 specials)
  return shape(Arch::llama, 259, 128, 4, 4, 2, 32, 384, 256, 10000.0, 1e-5, true);
}

ModelConfig quickstart_large() {  // a larger tiny model on the same vocabulary (a teacher for the student)
  return shape(Arch::llama, 259, 256, 6, 8, 4, 32, 768, 256, 10000.0, 1e-5, true);
}

// meta-llama/Llama-3.2-1B's config.json (tied, rope_theta 5e5, rope_scaling llama3 x32 from 8192, max_position
// 131072, 32/8 heads of 64) at half the width: C 2048 -> 1024, F 8192 -> 4096, 16 -> 24 layers.
ModelConfig llama32_05b() {
  ModelConfig c = shape(Arch::llama, 128256, 1024, 24, 16, 4, 64, 4096, 131072, 500000.0, 1e-5, true);
  c.rope_scaling.type = kernels::RopeScaling::Type::llama3;
  c.rope_scaling.factor = 32.0;
  c.rope_scaling.low_freq_factor = 1.0;
  c.rope_scaling.high_freq_factor = 4.0;
  c.rope_scaling.original_max_position = 8192;
  return c;
}

// mistralai/Mistral-7B-v0.1's config.json (untied, vocab 32000, sliding_window 4096, rope_theta 1e4, head_dim 128,
// 4:1 GQA, F = 3.5 C) at a quarter of the width: C 4096 -> 1024, 32/8 -> 8/2 heads, 28 layers.
ModelConfig mistral_05b() {
  ModelConfig c = shape(Arch::mistral, 32000, 1024, 28, 8, 2, 128, 3584, 32768, 10000.0, 1e-5, false);
  c.sliding_window = 4096;
  return c;
}

// google/gemma-2-2b's config.json (tied, vocab 256000, head_dim 256, query_pre_attn_scalar 256, soft-caps 50 / 30,
// sliding_window 4096 on the even layers) at C 2304 -> 1024, 8/4 -> 4/2 heads, F 9216 -> 4096, 16 layers.
ModelConfig gemma2_05b() {
  ModelConfig c = shape(Arch::gemma2, 256000, 1024, 16, 4, 2, 256, 4096, 8192, 10000.0, 1e-6, true);
  c.query_pre_attn_scalar = 256;
  c.attn_softcap = 50.0;
  c.final_softcap = 30.0;
  c.sliding_window = 4096;
  return c;
}

// google/gemma-3-270m / gemma-3-1b's config.json (tied, vocab 262144, 4 heads / 1 KV head of 256, q/k norms,
// query_pre_attn_scalar 256, no soft-caps, sliding_window 512 with every 6th layer global, RoPE 1e6 global / 1e4
// local, no rope_scaling) between the two: C 640 / 1152 -> 1024, F 2048 / 6912 -> 4096, 16 layers.
ModelConfig gemma3_05b() {
  ModelConfig c = shape(Arch::gemma3, 262144, 1024, 16, 4, 1, 256, 4096, 32768, 1000000.0, 1e-6, true);
  c.query_pre_attn_scalar = 256;
  c.sliding_window = 512;
  c.rope_local_theta = 10000.0;
  return c;
}

// microsoft/Phi-3-mini-128k-instruct's config.json (fused qkv_proj / gate_up_proj, untied, vocab 32064, MHA,
// rope_theta 1e4, longrope from original_max_position 4096 to 131072) at C 3072 -> 1024, 32 -> 16 heads of 64,
// F 8192 -> 4096, 24 layers. Its factors are per frequency (head_dim / 2 of them); these are not the real model's
// 48 but shaped like them: short ~1.0-1.2, long rising from 1 to ~60.
ModelConfig phi3_05b() {
  ModelConfig c = shape(Arch::phi3, 32064, 1024, 24, 16, 16, 64, 4096, 131072, 10000.0, 1e-5, false);
  c.rope_scaling.type = kernels::RopeScaling::Type::longrope;
  c.rope_scaling.original_max_position = 4096;
  c.rope_scaling.factor = 131072.0 / 4096.0;
  for (int64_t i = 0; i < c.head_dim / 2; ++i) {
    double x = static_cast<double>(i) / static_cast<double>(c.head_dim / 2 - 1);
    c.rope_scaling.short_factor.push_back(1.0 + 0.2 * x * x);
    c.rope_scaling.long_factor.push_back(1.0 + 59.0 * x * x * x);
  }
  return c;
}

struct Preset {
  std::string_view name;
  ModelConfig (*make)();
};
// One entry per name of kModelPresets.
const Preset kPresets[] = {
    {"quickstart", quickstart},
    {"quickstart-large", quickstart_large},
    {"smollm2-135m", [] { return shape(Arch::llama, 49152, 576, 30, 9, 3, 64, 1536, 8192, 100000.0, 1e-5, true); }},
    // Qwen/Qwen2.5-0.5B's config.json (GPU benchmarks with random weights)
    {"qwen2.5-0.5b", [] { return shape(Arch::qwen2, 151936, 896, 24, 14, 2, 64, 4864, 32768, 1e6, 1e-6, true); }},
    {"llama3.2-0.5b", llama32_05b},
    // Qwen/Qwen3-0.6B's config.json
    {"qwen3-0.6b", [] { return shape(Arch::qwen3, 151936, 1024, 28, 16, 8, 128, 3072, 40960, 1e6, 1e-6, true); }},
    {"mistral-0.5b", mistral_05b},
    {"gemma2-0.5b", gemma2_05b},
    {"gemma3-0.5b", gemma3_05b},
    {"phi3-0.5b", phi3_05b},
    {"tiny",
     [] { return shape(Arch::llama, 128, 64, 2, 4, 2, 16, 88, 2048, 10000.0, 1e-5, true); }},  // the golden Llama
};

}  // namespace

ModelConfig model_config_preset(const std::string& name) {
  for (const Preset& p : kPresets)
    if (p.name == name) {
      ModelConfig c = p.make();
      c.validate("preset " + name);
      return c;
    }
  TEMPER_FAIL() << "unknown model shape '" << name
                << "' (known: " << join_words({std::begin(kModelPresets), std::end(kModelPresets)}, ", ") << ")";
}

}  // namespace temper
