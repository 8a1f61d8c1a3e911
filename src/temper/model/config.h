// ModelConfig: the Llama family as Hugging Face configures it (Llama, SmolLM with tied embeddings,
// Qwen2 with q/k/v biases, Qwen3 with per-head q/k RMSNorm and an explicit head_dim).
// Parsing config.json is io's job (io/hf_config.h); built-in shapes for benchmarks are here.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace temper {

enum class Arch { llama, qwen2, qwen3 };

struct ModelConfig {
  Arch arch = Arch::llama;
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;        // C
  int64_t num_layers = 0;         // L
  int64_t num_heads = 0;          // H
  int64_t num_kv_heads = 0;       // Hkv
  int64_t head_dim = 0;           // D
  int64_t intermediate_size = 0;  // F
  int64_t max_position_embeddings = 2048;
  double rope_theta = 10000.0;
  double rms_norm_eps = 1e-6;
  bool tie_word_embeddings = false;
  bool qkv_bias = false;  // Qwen2
  bool qk_norm = false;   // Qwen3

  // Throws temper::Error naming the field, expected and actual value. `where` names the source.
  void validate(const std::string& where = "model config") const;
  int64_t qkv_dim() const { return (num_heads + 2 * num_kv_heads) * head_dim; }
  std::string summary() const;
};

std::string arch_name(Arch a);
// The built-in shapes model_config_preset knows (its error lists them; "tiny" is the golden Llama shape), and those
// `temper train` builds from scratch with the byte-level tokenizer (model.preset; `tiny`'s 128-token vocabulary is
// smaller than the tokenizer's).
inline constexpr std::string_view kModelPresets[] = {"quickstart", "quickstart-large", "smollm2-135m", "qwen2.5-0.5b",
                                                     "tiny"};
inline constexpr std::string_view kTrainPresets[] = {"quickstart", "quickstart-large", "qwen2.5-0.5b", "smollm2-135m"};
ModelConfig model_config_preset(const std::string& name);  // throws on an unknown name

}  // namespace temper
