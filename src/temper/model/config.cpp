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

void ModelConfig::validate(const std::string& where) const {
  auto positive = [&](const char* field, int64_t v) {
    TEMPER_CHECK(v > 0) << where << ": field '" << field << "' must be a positive integer, got " << v;
  };
  positive("vocab_size", vocab_size);
  positive("hidden_size", hidden_size);
  positive("num_hidden_layers", num_layers);
  positive("num_attention_heads", num_heads);
  positive("num_key_value_heads", num_kv_heads);
  positive("head_dim", head_dim);
  positive("intermediate_size", intermediate_size);
  positive("max_position_embeddings", max_position_embeddings);
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

ModelConfig model_config_preset(const std::string& name) {
  ModelConfig c;
  if (name == "smollm2-135m") {
    c.arch = Arch::llama;
    c.vocab_size = 49152;
    c.hidden_size = 576;
    c.num_layers = 30;
    c.num_heads = 9;
    c.num_kv_heads = 3;
    c.head_dim = 64;
    c.intermediate_size = 1536;
    c.max_position_embeddings = 8192;
    c.rope_theta = 100000.0;
    c.rms_norm_eps = 1e-5;
    c.tie_word_embeddings = true;
  } else if (name == "tiny") {
    c.arch = Arch::llama;
    c.vocab_size = 128;
    c.hidden_size = 64;
    c.num_layers = 2;
    c.num_heads = 4;
    c.num_kv_heads = 2;
    c.head_dim = 16;
    c.intermediate_size = 88;
    c.max_position_embeddings = 2048;
    c.rope_theta = 10000.0;
    c.rms_norm_eps = 1e-5;
    c.tie_word_embeddings = true;
  } else if (name == "quickstart") {  // temper train's built-in tiny model (byte-level vocabulary + 3 specials)
    c.arch = Arch::llama;
    c.vocab_size = 259;
    c.hidden_size = 128;
    c.num_layers = 4;
    c.num_heads = 4;
    c.num_kv_heads = 2;
    c.head_dim = 32;
    c.intermediate_size = 384;
    c.max_position_embeddings = 256;
    c.rope_theta = 10000.0;
    c.rms_norm_eps = 1e-5;
    c.tie_word_embeddings = true;
  } else if (name == "quickstart-large") {  // a larger tiny model on the same vocabulary (a teacher for the student)
    c = model_config_preset("quickstart");
    c.hidden_size = 256;
    c.num_layers = 6;
    c.num_heads = 8;
    c.num_kv_heads = 4;
    c.head_dim = 32;
    c.intermediate_size = 768;
  } else if (name == "qwen2.5-0.5b") {  // Qwen/Qwen2.5-0.5B's config.json (GPU benchmarks with random weights)
    c.arch = Arch::qwen2;
    c.vocab_size = 151936;
    c.hidden_size = 896;
    c.num_layers = 24;
    c.num_heads = 14;
    c.num_kv_heads = 2;
    c.head_dim = 64;
    c.intermediate_size = 4864;
    c.max_position_embeddings = 32768;
    c.rope_theta = 1000000.0;
    c.rms_norm_eps = 1e-6;
    c.tie_word_embeddings = true;
    c.qkv_bias = true;
  } else if (name == "llama3.2-0.5b") {
    // meta-llama/Llama-3.2-1B's config.json (tied, rope_theta 5e5, rope_scaling llama3 x32 from 8192,
    // max_position 131072, 32/8 heads of 64) at half the width: C 2048 -> 1024, F 8192 -> 4096, 16 -> 24 layers.
    c.arch = Arch::llama;
    c.vocab_size = 128256;
    c.hidden_size = 1024;
    c.num_layers = 24;
    c.num_heads = 16;
    c.num_kv_heads = 4;
    c.head_dim = 64;
    c.intermediate_size = 4096;
    c.max_position_embeddings = 131072;
    c.rope_theta = 500000.0;
    c.rms_norm_eps = 1e-5;
    c.tie_word_embeddings = true;
    c.rope_scaling.type = kernels::RopeScaling::Type::llama3;
    c.rope_scaling.factor = 32.0;
    c.rope_scaling.low_freq_factor = 1.0;
    c.rope_scaling.high_freq_factor = 4.0;
    c.rope_scaling.original_max_position = 8192;
  } else if (name == "qwen3-0.6b") {  // Qwen/Qwen3-0.6B's config.json
    c.arch = Arch::qwen3;
    c.vocab_size = 151936;
    c.hidden_size = 1024;
    c.num_layers = 28;
    c.num_heads = 16;
    c.num_kv_heads = 8;
    c.head_dim = 128;
    c.intermediate_size = 3072;
    c.max_position_embeddings = 40960;
    c.rope_theta = 1000000.0;
    c.rms_norm_eps = 1e-6;
    c.tie_word_embeddings = true;
    c.qk_norm = true;
  } else if (name == "mistral-0.5b") {
    // mistralai/Mistral-7B-v0.1's config.json (untied, vocab 32000, sliding_window 4096, rope_theta 1e4,
    // head_dim 128, 4:1 GQA, F = 3.5 C) at a quarter of the width: C 4096 -> 1024, 32/8 -> 8/2 heads, 28 layers.
    c.arch = Arch::mistral;
    c.vocab_size = 32000;
    c.hidden_size = 1024;
    c.num_layers = 28;
    c.num_heads = 8;
    c.num_kv_heads = 2;
    c.head_dim = 128;
    c.intermediate_size = 3584;
    c.max_position_embeddings = 32768;
    c.rope_theta = 10000.0;
    c.rms_norm_eps = 1e-5;
    c.sliding_window = 4096;
  } else if (name == "gemma2-0.5b") {
    // google/gemma-2-2b's config.json (tied, vocab 256000, head_dim 256, query_pre_attn_scalar 256, soft-caps
    // 50 / 30, sliding_window 4096 on the even layers) at C 2304 -> 1024, 8/4 -> 4/2 heads, F 9216 -> 4096, 16 layers.
    c.arch = Arch::gemma2;
    c.vocab_size = 256000;
    c.hidden_size = 1024;
    c.num_layers = 16;
    c.num_heads = 4;
    c.num_kv_heads = 2;
    c.head_dim = 256;
    c.intermediate_size = 4096;
    c.max_position_embeddings = 8192;
    c.rope_theta = 10000.0;
    c.rms_norm_eps = 1e-6;
    c.tie_word_embeddings = true;
    c.act = Activation::gelu_tanh;
    c.norm_offset = c.embed_scale = c.sandwich_norm = true;
    c.query_pre_attn_scalar = 256;
    c.attn_softcap = 50.0;
    c.final_softcap = 30.0;
    c.sliding_window = 4096;
    c.sliding_pattern = 2;
  } else if (name == "gemma3-0.5b") {
    // google/gemma-3-270m / gemma-3-1b's config.json (tied, vocab 262144, 4 heads / 1 KV head of 256, q/k norms,
    // query_pre_attn_scalar 256, no soft-caps, sliding_window 512 with every 6th layer global, RoPE 1e6 global /
    // 1e4 local, no rope_scaling) between the two: C 640 / 1152 -> 1024, F 2048 / 6912 -> 4096, 16 layers.
    c.arch = Arch::gemma3;
    c.vocab_size = 262144;
    c.hidden_size = 1024;
    c.num_layers = 16;
    c.num_heads = 4;
    c.num_kv_heads = 1;
    c.head_dim = 256;
    c.intermediate_size = 4096;
    c.max_position_embeddings = 32768;
    c.rope_theta = 1000000.0;
    c.rms_norm_eps = 1e-6;
    c.tie_word_embeddings = true;
    c.qk_norm = true;
    c.act = Activation::gelu_tanh;
    c.norm_offset = c.embed_scale = c.sandwich_norm = true;
    c.query_pre_attn_scalar = 256;
    c.sliding_window = 512;
    c.sliding_pattern = 6;
    c.rope_local_theta = 10000.0;
  } else if (name == "phi3-0.5b") {
    // microsoft/Phi-3-mini-128k-instruct's config.json (fused qkv_proj / gate_up_proj, untied, vocab 32064, MHA,
    // rope_theta 1e4, longrope from original_max_position 4096 to 131072) at C 3072 -> 1024, 32 -> 16 heads of
    // 64, F 8192 -> 4096, 24 layers. Its factors are per frequency (head_dim / 2 of them); these are not the
    // real model's 48 but shaped like them: short ~1.0-1.2, long rising from 1 to ~60.
    c.arch = Arch::phi3;
    c.vocab_size = 32064;
    c.hidden_size = 1024;
    c.num_layers = 24;
    c.num_heads = 16;
    c.num_kv_heads = 16;
    c.head_dim = 64;
    c.intermediate_size = 4096;
    c.max_position_embeddings = 131072;
    c.rope_theta = 10000.0;
    c.rms_norm_eps = 1e-5;
    c.fused_proj = true;
    c.rope_scaling.type = kernels::RopeScaling::Type::longrope;
    c.rope_scaling.original_max_position = 4096;
    c.rope_scaling.factor = 131072.0 / 4096.0;
    for (int64_t i = 0; i < c.head_dim / 2; ++i) {
      double x = static_cast<double>(i) / static_cast<double>(c.head_dim / 2 - 1);
      c.rope_scaling.short_factor.push_back(1.0 + 0.2 * x * x);
      c.rope_scaling.long_factor.push_back(1.0 + 59.0 * x * x * x);
    }
  } else {
    TEMPER_FAIL() << "unknown model shape '" << name
                  << "' (known: " << join_words({std::begin(kModelPresets), std::end(kModelPresets)}, ", ") << ")";
  }
  c.validate("preset " + name);
  return c;
}

}  // namespace temper
