// Row n of log softmax(h W^T) in double, for the classifier tests' references (soft targets, reverse KL): h is
// [N, C] and W is [V, C], both row-major; the max is taken out before the exponentials.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace temper::test {

inline void log_softmax_row(const std::vector<double>& h, const std::vector<double>& w, int64_t n, int64_t C, int64_t V,
                            std::vector<double>& lp) {
  lp.assign(static_cast<size_t>(V), 0.0);
  double m = -1e300;
  for (int64_t v = 0; v < V; ++v) {
    double z = 0;
    for (int64_t c = 0; c < C; ++c) z += h[static_cast<size_t>(n * C + c)] * w[static_cast<size_t>(v * C + c)];
    lp[static_cast<size_t>(v)] = z, m = std::max(m, z);
  }
  double se = 0;
  for (double z : lp) se += std::exp(z - m);
  for (double& z : lp) z -= m + std::log(se);
}

}  // namespace temper::test
