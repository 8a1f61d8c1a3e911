#include "temper/model/config.h"

#include <sstream>

#include "temper/core/error.h"
#include "temper/core/settings.h"

namespace temper {

std::string arch_name(Arch a) {
  switch (a) {
    case Arch::llama: return "llama";
    case Arch::qwen2: return "qwen2";
    case Arch::qwen3: return "qwen3";
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
}

std::string ModelConfig::summary() const {
  std::ostringstream s;
  s << arch_name(arch) << " L=" << num_layers << " C=" << hidden_size << " H=" << num_heads << " Hkv=" << num_kv_heads
    << " D=" << head_dim << " F=" << intermediate_size << " V=" << vocab_size << (tie_word_embeddings ? " tied" : "")
    << (qkv_bias ? " qkv_bias" : "") << (qk_norm ? " qk_norm" : "");
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
  } else {
    TEMPER_FAIL() << "unknown model shape '" << name
                  << "' (known: " << join_words({std::begin(kModelPresets), std::end(kModelPresets)}, ", ") << ")";
  }
  c.validate("preset " + name);
  return c;
}

}  // namespace temper
