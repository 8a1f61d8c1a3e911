// Exact fronts of small products by set value iteration and by enumeration (see ground_truth.h).
#include "temper/tabular/ground_truth.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "temper/core/error.h"
#include "temper/tabular/pareto.h"

namespace temper::tabular {
namespace {

// ND of U_a {r + gamma v : v in V(s', u')} at (s, u); V(terminal) = {0}.
std::vector<double> backup(const ProductMdp& p, const std::vector<std::vector<double>>& V, int64_t s, int64_t u,
                           double gamma) {
  const int D = p.D;
  std::vector<double> all;
  for (int64_t a = 0; a < p.A(); ++a) {
    const ProductMdp::Step st = p.step(s, u, a);
    if (st.terminal) {
      all.insert(all.end(), st.r, st.r + D);
      continue;
    }
    const std::vector<double>& next = V[st.s2 * p.U + st.u2];
    for (size_t k = 0; k < next.size(); k += D)
      for (int d = 0; d < D; ++d) all.push_back(static_cast<double>(st.r[d]) + gamma * next[k + d]);
  }
  return pareto_filter<double>(all, D);
}

}  // namespace

std::vector<double> true_front(const ProductMdp& p, double gamma, int64_t max_sweeps) {
  const int D = p.D;
  std::vector<std::vector<double>> V(p.S() * p.U, std::vector<double>(D, 0.0));
  for (int64_t sweep = 0; sweep < max_sweeps; ++sweep) {
    bool changed = false;
    std::vector<std::vector<double>> next(V.size());
    for (int64_t s = 0; s < p.S(); ++s)
      for (int64_t u = 0; u < p.U; ++u) {
        const int64_t i = s * p.U + u;
        next[i] = p.terminal[u] ? std::vector<double>(D, 0.0) : backup(p, V, s, u, gamma);
        changed = changed || next[i] != V[i];
      }
    V.swap(next);
    if (!changed) return V[p.world.start * p.U + p.u0];
  }
  TEMPER_FAIL() << "world '" << p.world.name << "': the Pareto sets did not settle after " << max_sweeps
                << " sweeps (a machine paying rewards inside a cycle makes the front infinite)";
}

std::vector<double> front_by_enumeration(const ProductMdp& p, double gamma, int64_t max_len) {
  const int D = p.D;
  std::vector<double> returns;
  // Depth-first over action sequences; ret accumulates sum_t gamma^t r_t.
  std::vector<double> ret(D, 0.0);
  auto rec = [&](auto&& self, int64_t s, int64_t u, int64_t depth, double disc) -> void {
    if (p.terminal[u] || depth == max_len) {
      returns.insert(returns.end(), ret.begin(), ret.end());
      return;
    }
    for (int64_t a = 0; a < p.A(); ++a) {
      const ProductMdp::Step st = p.step(s, u, a);
      const std::vector<double> saved = ret;
      for (int d = 0; d < D; ++d) ret[d] += disc * st.r[d];
      self(self, st.s2, st.u2, depth + 1, disc * gamma);
      ret = saved;
    }
  };
  rec(rec, p.world.start, p.u0, 0, 1.0);
  return pareto_filter<double>(returns, D);
}

double scalar_optimum(const ProductMdp& p, double gamma, std::span<const double> w) {
  TEMPER_CHECK(static_cast<int>(w.size()) == p.D)
      << "scalar_optimum: " << w.size() << " weights for " << p.D << " objectives";
  std::vector<double> V(p.S() * p.U, 0.0);
  for (int64_t it = 0; it < 100000; ++it) {
    double delta = 0;
    for (int64_t s = 0; s < p.S(); ++s)
      for (int64_t u = 0; u < p.U; ++u) {
        if (p.terminal[u]) continue;
        double best = -std::numeric_limits<double>::infinity();
        for (int64_t a = 0; a < p.A(); ++a) {
          const ProductMdp::Step st = p.step(s, u, a);
          double q = st.terminal ? 0.0 : gamma * V[st.s2 * p.U + st.u2];
          for (int d = 0; d < p.D; ++d) q += w[d] * st.r[d];
          best = std::max(best, q);
        }
        delta = std::max(delta, std::abs(best - V[s * p.U + u]));
        V[s * p.U + u] = best;
      }
    if (delta < 1e-12) break;
  }
  return V[p.world.start * p.U + p.u0];
}

FrontMatch match_fronts(std::span<const double> learned, std::span<const double> truth, int D, double tol) {
  auto dist = [&](const double* a, const double* b) {
    double m = 0;
    for (int d = 0; d < D; ++d) m = std::max(m, std::abs(a[d] - b[d]));
    return m;
  };
  FrontMatch r;
  for (size_t i = 0; i < truth.size(); i += D) {
    double best = std::numeric_limits<double>::infinity();
    for (size_t j = 0; j < learned.size(); j += D) best = std::min(best, dist(&truth[i], &learned[j]));
    (best <= tol ? r.recovered : r.missing) += 1;
    r.worst = std::max(r.worst, best);
  }
  for (size_t j = 0; j < learned.size(); j += D) {
    bool near = false;
    for (size_t i = 0; i < truth.size() && !near; i += D) near = dist(&truth[i], &learned[j]) <= tol;
    if (!near) ++r.spurious;
  }
  return r;
}

}  // namespace temper::tabular
