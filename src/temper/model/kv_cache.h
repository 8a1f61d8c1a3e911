// A contiguous per-sequence KV cache for single-sequence generation (`temper generate`): per layer
// K and V of [max_len, Hkv*D] after RoPE. The batched block-pool cache with prefix sharing is the
// rollout engine's (a later part); this one keeps generation O(T) per token without it.
#pragma once

#include <cstdint>
#include <vector>

#include "temper/model/config.h"

namespace temper {

struct KvCache {
  int64_t max_len = 0, len = 0, row = 0, layers = 0;  // row = Hkv * D
  std::vector<float> k, v;                            // [L, max_len, row]

  void reset(const ModelConfig& c, int64_t max_len_);
  float* k_layer(int64_t l) { return k.data() + l * max_len * row; }
  float* v_layer(int64_t l) { return v.data() + l * max_len * row; }
};

}  // namespace temper
