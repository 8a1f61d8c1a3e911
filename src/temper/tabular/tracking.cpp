// Tracking a front vector through the learned sets (see tracking.h).
#include "temper/tabular/tracking.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "temper/core/error.h"

namespace temper::tabular {

TrackResult track(const ParetoQ& q, const ProductMdp& p, std::span<const float> target, int64_t max_steps) {
  const int D = p.D;
  TEMPER_CHECK(static_cast<int>(target.size()) == D)
      << "track: a target of " << target.size() << " values for " << D << " objectives";
  const float gamma = q.config().gamma;
  TrackResult res;
  res.realised.assign(D, 0.0);
  std::vector<float> want(target.begin(), target.end());
  int64_t s = p.world.start, u = p.u0;
  double disc = 1;
  for (int64_t t = 0; t < max_steps && !p.terminal[u]; ++t) {
    double best = std::numeric_limits<double>::infinity();
    int64_t best_a = 0;
    std::vector<float> best_v;  // the ND element to track next (empty: the set expected the episode to end)
    for (int64_t a = 0; a < p.A(); ++a) {
      const std::vector<float> qs = q.qset(s, u, a);
      const std::vector<float>& nd = q.nd(s, u, a);
      for (size_t k = 0; k < qs.size(); k += D) {
        double gap = 0;
        for (int d = 0; d < D; ++d) gap = std::max(gap, std::abs(static_cast<double>(qs[k + d]) - want[d]));
        if (gap < best) {
          best = gap;
          best_a = a;
          best_v = nd.empty() ? std::vector<float>{} : std::vector<float>(nd.begin() + k, nd.begin() + k + D);
        }
      }
    }
    res.worst_gap = std::max(res.worst_gap, best);
    const ProductMdp::Step st = p.step(s, u, best_a);
    res.actions.push_back(best_a);
    for (int d = 0; d < D; ++d) res.realised[d] += disc * st.r[d];
    disc *= gamma;
    s = st.s2;
    u = st.u2;
    if (best_v.empty()) break;
    want = best_v;
  }
  res.terminated = p.terminal[u] != 0;
  return res;
}

}  // namespace temper::tabular
