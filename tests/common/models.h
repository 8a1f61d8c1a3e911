// Small model configurations for tests: the golden Llama shape switched to each architecture.
#pragma once

#include "temper/model/config.h"
#include "temper/model/transformer.h"

namespace temper::test {

inline ModelConfig small_config(Arch arch, int64_t max_pos = 256) {
  ModelConfig c = model_config_preset("tiny");
  c.arch = arch;
  apply_arch_features(c);
  c.tie_word_embeddings = arch == Arch::llama;
  c.max_position_embeddings = max_pos;
  return c;
}

// The golden shape with each newer family's features switched on (windows shorter than the tests' sequences,
// soft-caps that bend, Gemma's norms and scales, Phi-3's fused projections and longrope past position 32).
inline ModelConfig family_config(Arch arch, int64_t max_pos = 256) {
  ModelConfig c = small_config(arch, max_pos);
  c.tie_word_embeddings = arch == Arch::gemma2 || arch == Arch::gemma3;
  if (arch == Arch::mistral || arch == Arch::phi3) c.sliding_window = 8;
  if (arch == Arch::gemma2 || arch == Arch::gemma3) {
    c.query_pre_attn_scalar = 24;
    c.sliding_window = 8;
    c.sliding_pattern = 2;
  }
  if (arch == Arch::gemma2) {
    c.attn_softcap = 3;
    c.final_softcap = 8;
  }
  if (arch == Arch::gemma3) {
    c.rope_theta = 1e6;
    c.rope_local_theta = 1e4;
    c.rope_scaling.type = kernels::RopeScaling::Type::linear;
    c.rope_scaling.factor = 4;
  }
  if (arch == Arch::phi3) {
    kernels::RopeScaling& r = c.rope_scaling;
    r.type = kernels::RopeScaling::Type::longrope;
    r.original_max_position = 32;
    r.factor = static_cast<double>(max_pos) / 32.0;
    for (int64_t i = 0; i < c.head_dim / 2; ++i) {
      r.short_factor.push_back(1.0 + 0.1 * static_cast<double>(i));
      r.long_factor.push_back(1.0 + 0.5 * static_cast<double>(i));
    }
  }
  return c;
}

// A small Qwen3-shaped model with random weights (N(0, 0.3): peaked next-token distributions), for the
// rollout engine's tests.
struct RandomModel {
  ModelConfig cfg = small_config(Arch::qwen3, 128);
  Transformer model{cfg};
  RandomModel() { model.init_random(17, 0.3f); }
};

}  // namespace temper::test
