// Untruncated token draws; see draw.h.
#include "temper/kernels/draw.h"

#include <cmath>

#include "temper/core/error.h"

namespace temper::kernels {

float max_logit(const float* z, int64_t V) {
  float mx = -INFINITY;
  for (int64_t v = 0; v < V; ++v)
    if (z[v] > mx) mx = z[v];  // NaN never compares greater
  TEMPER_CHECK(std::isfinite(mx)) << "sampler: the model produced no finite logit (NaN/inf weights or activations)";
  return mx;
}

Draw draw_greedy(const float* z, int64_t V, float mx) {
  int64_t best = 0;
  while (!(z[best] == mx)) ++best;
  (void)V;
  return {static_cast<int32_t>(best), 0.f};
}

Draw draw_tempered(const float* z, int64_t V, float mx, float temperature, double uniform, std::vector<double>& w) {
  const float inv_t = 1.0f / temperature;
  if (static_cast<int64_t>(w.size()) < V) w.resize(static_cast<size_t>(V));
  double total = 0;
  for (int64_t v = 0; v < V; ++v) {
    const double e = std::isfinite(z[v]) ? std::exp(static_cast<double>(z[v] - mx) * inv_t) : -1.0;
    w[static_cast<size_t>(v)] = e;
    if (e >= 0) total += e;
  }
  const double u = uniform * total;
  double acc = 0;
  int64_t pick = -1;
  for (int64_t v = 0; v < V; ++v) {
    const double e = w[static_cast<size_t>(v)];
    if (e < 0) continue;
    acc += e;
    pick = v;
    if (u < acc) break;
  }
  const float lp = static_cast<float>(static_cast<double>(z[pick] - mx) * inv_t - std::log(total));
  return {static_cast<int32_t>(pick), lp};
}

}  // namespace temper::kernels
