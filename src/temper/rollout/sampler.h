// Choosing the next token from logits: greedy, or temperature -> top-k -> top-p -> min-p ->
// a draw from the renormalised distribution with the sequence's own Rng stream (so a sequence's
// tokens do not depend on what else runs). Also returns the log-prob of the chosen token under
// the distribution actually sampled from. The full sampler chain with penalties and stop strings
// belongs to the rollout engine; this is its core.
#pragma once

#include <cstdint>
#include <vector>

#include "temper/core/rng.h"

namespace temper::rollout {

struct SamplerConfig {
  bool greedy = false;
  float temperature = 1.0f;  // > 0
  int64_t top_k = 0;         // 0: off
  float top_p = 1.0f;        // (0, 1]
  float min_p = 0.0f;        // [0, 1): drop tokens with p < min_p * p_max
  void validate() const;
};

struct Sample {
  int32_t token;
  float logprob;  // under the (tempered, truncated, renormalised) sampling distribution
};

class Sampler {
 public:
  explicit Sampler(const SamplerConfig& c);
  Sample sample(const float* logits, int64_t V, Rng& rng);

 private:
  SamplerConfig cfg_;
  std::vector<std::pair<float, int32_t>> cand_;  // reused: no allocation per token after the first
};

}  // namespace temper::rollout
