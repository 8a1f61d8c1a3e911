// Drawing a token from one row of logits without truncation (rollout::Sampler's simple path, and a
// device mirror that must draw the same token): the maximum, the first argmax (greedy), and the
// tempered softmax inverted at a uniform in vocabulary order (no sort; exp terms in double, each
// computed once). Non-finite logits are skipped.
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
Draw draw_tempered(const float* z, int64_t V, float mx, float temperature, double uniform, std::vector<double>& scratch);

}  // namespace temper::kernels
