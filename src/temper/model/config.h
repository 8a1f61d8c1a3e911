// ModelConfig: the decoder families as Hugging Face configures them: Llama (SmolLM, Llama-3.x with
// rope_scaling llama3), Qwen2 (q/k/v biases), Qwen3 (per-head q/k RMSNorm), Mistral (sliding window),
// Gemma-2/3 (GeGLU, (1 + w) norms, four norms a layer, soft-capping, local/global layers), Phi-3 (fused
// projections, longrope). Parsing config.json is io's job (io/hf_config.h); built-in shapes are here.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "temper/kernels/rope.h"

namespace temper {

enum class Arch { llama, qwen2, qwen3, mistral, gemma2, gemma3, phi3 };
enum class Activation { silu, gelu_tanh };  // the MLP's gate: SwiGLU or GeGLU (torch's tanh GELU)

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
  bool qk_norm = false;   // Qwen3, Gemma-3
  Activation act = Activation::silu;
  bool norm_offset = false;          // Gemma: every RMSNorm scales by (1 + w)
  bool embed_scale = false;          // Gemma: the embedding lookup times sqrt(hidden_size)
  bool sandwich_norm = false;        // Gemma-2/3: RMSNorm on the attention and MLP outputs too (four a layer)
  bool fused_proj = false;           // Phi-3: q/k/v and gate/up stored as qkv_proj and gate_up_proj
  double query_pre_attn_scalar = 0;  // > 0: scores scaled by its -1/2 power instead of head_dim's (Gemma)
  double attn_softcap = 0;           // > 0: attention scores soft-capped, cap * tanh(s / cap) (Gemma-2)
  double final_softcap = 0;          // > 0: the logits soft-capped the same way (Gemma-2)
  int64_t sliding_window = 0;        // > 0: a sliding layer's query sees the last this-many positions (itself included)
  int64_t sliding_pattern = 0;       // 0: every layer slides (with a window); k: layer i slides unless (i + 1) % k == 0
  double rope_local_theta = 0;       // > 0: the sliding layers' RoPE base, unscaled (Gemma-3)
  kernels::RopeScaling rope_scaling;  // RoPE frequencies' scaling (the global layers' on Gemma-3)
  int64_t pad_token_id = -1;  // >= 0: the embedding's padding_idx (HF: no gradient into that row from the lookup)

  // Throws temper::Error naming the field, expected and actual value. `where` names the source; with gguf_prefix
  // (a GGUF's "llama.") the sizes are named by their GGUF metadata keys. Every size is bounded (kMaxLayers, ...):
  // an absurd file is refused here, before anything is sized from it.
  void validate(const std::string& where = "model config", const std::string& gguf_prefix = "") const;
  double param_count() const;  // every parameter (no padding), in double: bounded before any int64 product
  int64_t qkv_dim() const { return (num_heads + 2 * num_kv_heads) * head_dim; }
  bool slides(int64_t layer) const {  // whether the layer's attention is windowed
    return sliding_window > 0 && (sliding_pattern == 0 || (layer + 1) % sliding_pattern != 0);
  }
  float attn_scale() const;  // the factor on q.k
  // The architecture's features in use, one phrase each ("sliding window 4096 on 1 of 2 layers", ...).
  std::vector<std::string> features() const;
  std::string summary() const;
};

// The largest sizes a model config may give: generous (10-100x the largest dense checkpoints': Llama-3.1-405B's 126
// layers, hidden 16384, intermediate 53248, 128 heads, head_dim 128, 131072 positions; Gemma-3's 262144-token
// vocabulary). A config past one is a mistake or a hostile file, refused before its sizes reach an allocation.
inline constexpr int64_t kMaxLayers = 1024;
inline constexpr int64_t kMaxHidden = 65536;
inline constexpr int64_t kMaxIntermediate = 1 << 20;  // 1,048,576
inline constexpr int64_t kMaxHeads = 1024;            // query heads, and key/value heads
inline constexpr int64_t kMaxHeadDim = 1024;
inline constexpr int64_t kMaxVocab = 1 << 22;      // 4,194,304
inline constexpr int64_t kMaxPositions = 1 << 22;  // 4,194,304 (Qwen2.5-1M: 1,010,000)
inline constexpr double kMaxParams = 2e12;

std::string arch_name(Arch a);
// What the family fixes, whatever the checkpoint says: Qwen2's q/k/v biases, Qwen3's and Gemma-3's q/k norms,
// Phi-3's fused projections, Gemma's GeGLU, (1 + w) norms, embedding scale and four norms a layer, Gemma-2's
// every-other-layer window (Gemma-3's pattern defaults to 6; its files may say otherwise). The readers of
// config.json and GGUF and the presets call it after setting `arch`.
void apply_arch_features(ModelConfig& c);
// The built-in shapes model_config_preset knows (its error lists them; "tiny" is the golden Llama shape), and those
// `temper train` builds from scratch with the byte-level tokenizer (model.preset; `tiny`'s 128-token vocabulary is
// smaller than the tokenizer's).
inline constexpr std::string_view kModelPresets[] = {
    "quickstart",   "quickstart-large", "smollm2-135m", "qwen2.5-0.5b", "llama3.2-0.5b", "qwen3-0.6b",
    "mistral-0.5b", "gemma2-0.5b",      "gemma3-0.5b",  "phi3-0.5b",    "tiny"};
inline constexpr std::string_view kTrainPresets[] = {"quickstart", "quickstart-large", "qwen2.5-0.5b", "smollm2-135m"};
ModelConfig model_config_preset(const std::string& name);  // throws on an unknown name

}  // namespace temper
