// Untruncated token draws; see draw.h.
#include "temper/kernels/draw.h"

#include <cmath>

#include "temper/core/error.h"
#include "temper/kernels/cpu/isa_table.h"

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

Draw draw_tempered(const float* z, int64_t V, float mx, float temperature, double uniform, DrawScratch& s) {
  const float inv_t = 1.0f / temperature;
  const int64_t nb = (V + 15) / 16;
  if (static_cast<int64_t>(s.weights.size()) < V) s.weights.resize(static_cast<size_t>(V));
  if (static_cast<int64_t>(s.blocks.size()) < nb) s.blocks.resize(static_cast<size_t>(nb));
  const float* e = s.weights.data();
  const float* blk = s.blocks.data();
  isa_table().tempered_weights(z, V, mx, inv_t, s.weights.data(), s.blocks.data());
  double total = 0;
  for (int64_t b = 0; b < nb; ++b) total += blk[b];
  const double u = uniform * total;
  double acc = 0;
  int64_t b = 0;
  for (; b < nb - 1; ++b) {  // the block where the running sum passes u (else the last)
    if (u < acc + blk[b]) break;
    acc += blk[b];
  }
  int64_t pick = -1;
  for (int64_t v = 16 * b; v < V; ++v) {  // within it, and past it when its f32 sum fell short of u
    if (!(e[v] > 0.f)) continue;
    acc += e[v];
    pick = v;
    if (u < acc) break;
  }
  if (pick < 0)  // u at the very top (rounding): the last token with weight
    for (int64_t v = V - 1; v >= 0 && pick < 0; --v)
      if (e[v] > 0.f) pick = v;
  TEMPER_CHECK(pick >= 0) << "sampler: no token has weight (all logits non-finite)";
  const float lp = static_cast<float>(static_cast<double>(z[pick] - mx) * inv_t - std::log(total));
  return {static_cast<int32_t>(pick), lp};
}

}  // namespace temper::kernels
