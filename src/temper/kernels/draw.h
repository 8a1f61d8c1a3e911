// Drawing a token from one row of logits without truncation (rollout::Sampler's simple path, and a
// device mirror that must draw the same token): the maximum, the first argmax (greedy), and the
// tempered softmax inverted at a uniform in vocabulary order (no sort): the weights exp((z - max) / T)
// in f32 (vectorised, ~1 ulp), sums of 16 in f32, the total and the scan to the uniform's block in
// double, then the block's weights in double. Non-finite logits have weight 0.
#pragma once

#include <cstdint>
#include <vector>

namespace temper::kernels {

struct Draw {
  int32_t token;
  float logprob;  // under the tempered distribution (0 for greedy)
};
float max_logit(const float* z, int64_t V);  // throws when no logit is finite
Draw draw_greedy(const float* z, int64_t V, float mx);
struct DrawScratch {
  std::vector<float> weights, blocks;
};
Draw draw_tempered(const float* z, int64_t V, float mx, float temperature, double uniform, DrawScratch& scratch);

}  // namespace temper::kernels
