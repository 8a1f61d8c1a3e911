#include "temper/rollout/spec_sampling.h"

#include <algorithm>

#include "temper/core/error.h"

namespace temper::rollout {

int32_t sample_dense(const float* p, int64_t V, Rng& rng) {
  double z = 0;
  for (int64_t v = 0; v < V; ++v) z += p[v];
  TEMPER_CHECK(z > 0) << "speculative sampling: empty distribution";
  const double u = rng.uniform_f64() * z;
  double acc = 0;
  int64_t last = -1;
  for (int64_t v = 0; v < V; ++v) {
    if (p[v] <= 0.f) continue;
    acc += p[v];
    last = v;
    if (u < acc) return static_cast<int32_t>(v);
  }
  return static_cast<int32_t>(last);
}

bool spec_accept(float p_x, float q_x, Rng& rng) {
  TEMPER_CHECK(q_x > 0.f) << "speculative sampling: the drafted token has q = 0";
  const double u = rng.uniform_f64();
  return u * static_cast<double>(q_x) < static_cast<double>(p_x);
}

int32_t spec_residual(const float* p, const float* q, int64_t V, Rng& rng) {
  double z = 0;
  for (int64_t v = 0; v < V; ++v) z += std::max(0.f, p[v] - q[v]);
  if (!(z > 1e-12)) return sample_dense(p, V, rng);
  const double u = rng.uniform_f64() * z;
  double acc = 0;
  int64_t last = -1;
  for (int64_t v = 0; v < V; ++v) {
    const float r = p[v] - q[v];
    if (r <= 0.f) continue;
    acc += r;
    last = v;
    if (u < acc) return static_cast<int32_t>(v);
  }
  return static_cast<int32_t>(last);
}

}  // namespace temper::rollout
