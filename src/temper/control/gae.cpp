#include "temper/control/gae.h"

#include <cstddef>
#include <vector>

namespace temper::control {

void gae(const float* rewards, const float* values, const float* dones, int64_t T, int64_t N, float gamma, float lambda,
         float* adv, float* ret) {
  std::vector<double> last(static_cast<size_t>(N), 0.0);
  for (int64_t t = T - 1; t >= 0; --t) {
    for (int64_t i = 0; i < N; ++i) {
      double keep = 1.0 - dones[t * N + i];
      double delta = rewards[t * N + i] + double(gamma) * values[(t + 1) * N + i] * keep - values[t * N + i];
      last[i] = delta + double(gamma) * lambda * keep * last[i];
      adv[t * N + i] = static_cast<float>(last[i]);
      ret[t * N + i] = static_cast<float>(last[i] + values[t * N + i]);
    }
  }
}

}  // namespace temper::control
