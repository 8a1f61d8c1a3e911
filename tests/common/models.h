// Small model configurations for tests: the golden Llama shape switched to each architecture.
#pragma once

#include "temper/model/config.h"
#include "temper/model/transformer.h"

namespace temper::test {

inline ModelConfig small_config(Arch arch, int64_t max_pos = 256) {
  ModelConfig c = model_config_preset("tiny");
  c.arch = arch;
  c.qkv_bias = arch == Arch::qwen2;
  c.qk_norm = arch == Arch::qwen3;
  c.tie_word_embeddings = arch == Arch::llama;
  c.max_position_embeddings = max_pos;
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
