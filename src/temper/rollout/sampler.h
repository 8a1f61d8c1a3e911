// Choosing the next token from logits: the sampler chain of llama.cpp / HF generate, as one small
// object per sequence: penalties (repetition, presence, frequency over the last N tokens of prompt
// + completion) -> greedy, or temperature -> top-k -> top-p -> min-p -> a draw from the
// renormalised distribution with the sequence's own Rng stream. Follows llama.cpp's
// llama_sampler_penalties. Stop ids, stop strings and max new tokens end a sequence in the engine.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "temper/core/rng.h"
#include "temper/core/settings.h"
#include "temper/kernels/draw.h"

namespace temper::rollout {

struct SamplerConfig {
  bool greedy = false;
  float temperature = 1.0f;  // > 0
  int64_t top_k = 0;         // 0: off
  float top_p = 1.0f;        // (0, 1]
  float min_p = 0.0f;        // [0, 1): drop tokens with p < min_p * p_max
  float repetition_penalty = 1.0f;  // > 0; 1: off
  float presence_penalty = 0.0f;    // subtracted once from every token seen in the window
  float frequency_penalty = 0.0f;   // subtracted per occurrence in the window
  int64_t penalty_last_n = 64;      // window over prompt + completion; -1: all of it, 0: penalties off
  bool penalties() const {
    return penalty_last_n != 0 && (repetition_penalty != 1.0f || presence_penalty != 0.0f || frequency_penalty != 0.0f);
  }
  void validate() const;
  void visit(KeyVisitor& v);  // temperature, top_p, top_k, min_p (the keys a recipe's sampling sections take)
};

struct Sample {
  int32_t token;
  float logprob;  // under the (penalised, tempered, truncated, renormalised) sampling distribution
};

// The tokens so far, as the penalty window sees them: the prompt then the completion.
struct History {
  std::span<const int32_t> prompt, completion;
};

// Each sequence draws with its own Rng stream, so a sequence's tokens do not depend on what else runs.
// sample() returns the log-prob of the chosen token under the distribution actually sampled from (after
// penalties, temperature and truncation). The penalties as llama.cpp's llama_sampler_penalties
// (repetition: logit / p if > 0 else logit * p; then -= count * frequency + presence).
class Sampler {
 public:
  explicit Sampler(const SamplerConfig& c);
  Sample sample(const float* logits, int64_t V, Rng& rng, const History& history = {});
  // The whole distribution sample() draws from, dense over the vocabulary (0 outside the kept
  // support; greedy: one-hot at the argmax). Speculative decoding's p and q.
  void distribution(const float* logits, int64_t V, const History& history, float* p);
  const SamplerConfig& config() const { return cfg_; }
  // No penalties and no truncation (greedy, or temperature alone): one uniform per draw in vocabulary
  // order (kernels/draw.h), so a device can draw it from the same uniform (DeviceModel::forward_paged_choose).
  bool simple() const;

 private:
  const float* apply_penalties(const float* logits, int64_t V, const History& h);
  Sample draw(const float* logits, int64_t V, Rng& rng);
  Sample draw_untruncated(const float* logits, int64_t V, float mx, double uniform);
  float max_logit(const float* logits, int64_t V) const;
  // Truncation: cand_ sorted by tempered weight, returns how many are kept; *top is the largest weight.
  size_t truncate(const float* logits, int64_t V, double* top);

  SamplerConfig cfg_;
  std::vector<std::pair<float, int32_t>> cand_;  // reused: no allocation per token after the first
  std::vector<float> penalised_;                 // [V] when penalties are on
  std::vector<int32_t> count_;                   // [V] zero between calls
  kernels::DrawScratch weights_;                 // the untruncated draw's weights and block sums
};

}  // namespace temper::rollout
