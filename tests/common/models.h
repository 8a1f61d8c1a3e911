// Small model configurations for tests: the golden Llama shape switched to each architecture.
#pragma once

#include "temper/model/config.h"

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

}  // namespace temper::test
