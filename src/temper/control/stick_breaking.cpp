// ModeClusters::fit_stick_breaking: the spec's variational mixture prior over task modes (mode_clusters.h).
#include <algorithm>
#include <cmath>
#include <numeric>

#include "temper/control/mode_clusters.h"
#include "temper/control/point_stats.h"
#include "temper/core/error.h"

namespace temper::control {

namespace {
double digamma(double x) {  // recurrence up to x >= 6, then the asymptotic series
  double r = 0;
  for (; x < 6; x += 1) r -= 1 / x;
  const double f = 1 / (x * x);
  return r + std::log(x) - 0.5 / x - f * (1.0 / 12 - f * (1.0 / 120 - f * (1.0 / 252 - f * (1.0 / 240))));
}

// K starting centres by farthest-first traversal from the point nearest the data's mean (deterministic).
std::vector<double> farthest_first(const float* x, int64_t n, int64_t d, int64_t K, const std::vector<double>& mean) {
  std::vector<double> c;
  std::vector<double> near(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) near[i] = sq_dist(x + i * d, mean.data(), d);
  int64_t pick = std::min_element(near.begin(), near.end()) - near.begin();
  std::fill(near.begin(), near.end(), INFINITY);
  for (int64_t k = 0; k < K; ++k) {
    c.insert(c.end(), x + pick * d, x + (pick + 1) * d);
    for (int64_t i = 0; i < n; ++i) near[i] = std::min(near[i], sq_dist(x + i * d, &c[k * d], d));
    pick = std::max_element(near.begin(), near.end()) - near.begin();
  }
  return c;
}
}  // namespace

std::vector<int32_t> ModeClusters::fit_stick_breaking(const float* x, int64_t n, float alpha, float sigma,
                                                      int iterations) {
  TEMPER_CHECK(n >= 1) << "mode clusters: fit_stick_breaking() on no points";
  TEMPER_CHECK(alpha > 0 && sigma > 0) << "mode clusters: stick-breaking alpha and sigma must be > 0, got " << alpha
                                       << ", " << sigma;
  const int64_t d = dim_, K = std::min<int64_t>(max_modes_, n);
  const PointSpread spread = point_spread(x, n, d);
  const std::vector<double>& mean = spread.mean;
  const double tau2 = std::max(spread.mean_sq / double(d), 1e-12), s2 = double(sigma) * sigma * tau2;  // per-dim
  std::vector<double> m = farthest_first(x, n, d, K, mean), var(K, 0.0), phi(n * K, 0.0), logw(K);
  for (int64_t i = 0; i < n; ++i) {  // start: each point with its nearest starting centre
    int64_t best = 0;
    for (int64_t k = 1; k < K; ++k)
      if (sq_dist(x + i * d, &m[k * d], d) < sq_dist(x + i * d, &m[best * d], d)) best = k;
    phi[i * K + best] = 1;
  }
  for (int it = 0; it < iterations; ++it) {
    // Sticks in decreasing size (the usual reordering), then q(v_k) = Beta(1 + N_k, alpha + N_{>k}) and
    // q(mu_k) = N(m_k, var_k I) under the prior N(mean, tau2 I) and the likelihood N(mu_k, s2 I).
    std::vector<double> N(K, 0.0);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t k = 0; k < K; ++k) N[k] += phi[i * K + k];
    std::vector<int64_t> order(K);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return N[a] > N[b]; });
    std::vector<double> p2(phi.size());
    for (int64_t i = 0; i < n; ++i)
      for (int64_t k = 0; k < K; ++k) p2[i * K + k] = phi[i * K + order[k]];
    phi.swap(p2);
    std::vector<double> Ns(K);
    for (int64_t k = 0; k < K; ++k) Ns[k] = N[order[k]];
    double rest = std::accumulate(Ns.begin(), Ns.end(), 0.0), before = 0;
    for (int64_t k = 0; k < K; ++k) {
      rest -= Ns[k];
      const double g1 = 1 + Ns[k], g2 = alpha + rest, dg = digamma(g1 + g2);
      logw[k] = before + (k + 1 < K ? digamma(g1) - dg : 0.0);  // E[log pi_k]; the last stick takes the rest
      before += k + 1 < K ? digamma(g2) - dg : 0.0;
      const double prec = 1 / tau2 + Ns[k] / s2;
      var[k] = 1 / prec;
      for (int64_t j = 0; j < d; ++j) {
        double sx = 0;
        for (int64_t i = 0; i < n; ++i) sx += phi[i * K + k] * x[i * d + j];
        m[k * d + j] = (mean[j] / tau2 + sx / s2) / prec;
      }
    }
    double change = 0;
    std::vector<double> l(K);
    for (int64_t i = 0; i < n; ++i) {  // q(z_i) proportional to exp(E[log pi_k] + E[log N(x_i | mu_k, s2 I)])
      for (int64_t k = 0; k < K; ++k) l[k] = logw[k] - (sq_dist(x + i * d, &m[k * d], d) + d * var[k]) / (2 * s2);
      const double top = *std::max_element(l.begin(), l.end());
      double z = 0;
      for (double& v : l) z += (v = std::exp(v - top));
      for (int64_t k = 0; k < K; ++k)
        change = std::max(change, std::abs(l[k] / z - phi[i * K + k])), phi[i * K + k] = l[k] / z;
    }
    if (change < 1e-6) break;
  }
  // Modes: the components holding more than one point's worth of responsibility; labels the largest phi. None
  // does only when there are as many sticks as points and each holds one point's worth: then the one mode is the
  // largest stick (on a tie the earliest, whose expected weight is the largest), never the smallest.
  std::vector<double> N(K, 0.0);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t k = 0; k < K; ++k) N[k] += phi[i * K + k];
  std::vector<int64_t> kept;
  for (int64_t k = 0; k < K; ++k)
    if (N[k] > 1.0) kept.push_back(k);
  if (kept.empty()) kept.push_back(std::max_element(N.begin(), N.end()) - N.begin());
  centres_.clear();
  for (int64_t k : kept)
    for (int64_t j = 0; j < d; ++j) centres_.push_back(static_cast<float>(m[k * d + j]));
  std::vector<int32_t> label(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    size_t best = 0;
    for (size_t c = 1; c < kept.size(); ++c)
      if (phi[i * K + kept[c]] > phi[i * K + kept[best]]) best = c;
    label[i] = static_cast<int32_t>(best);
  }
  return label;
}

}  // namespace temper::control
