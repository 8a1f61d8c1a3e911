#include "temper/control/mode_clusters.h"

#include <cmath>
#include <map>
#include <utility>

#include "temper/control/point_stats.h"
#include "temper/core/error.h"

namespace temper::control {

int32_t ModeClusters::assign(const float* x) const {
  TEMPER_CHECK(modes() > 0) << "mode clusters: assign() before fit()";
  int32_t best = 0;
  double bd = sq_dist(x, centres_.data(), dim_);
  for (int64_t k = 1; k < modes(); ++k) {
    double d = sq_dist(x, &centres_[k * dim_], dim_);
    if (d < bd) bd = d, best = static_cast<int32_t>(k);
  }
  return best;
}

std::vector<int32_t> ModeClusters::fit(const float* x, int64_t n, float new_mode_distance, int refine_passes) {
  TEMPER_CHECK(n >= 1) << "mode clusters: fit() on no points";
  const double lambda2 = double(new_mode_distance) * new_mode_distance * point_spread(x, n, dim_).mean_sq;
  centres_.assign(x, x + dim_);
  std::vector<double> count = {1.0};
  std::vector<int32_t> label(static_cast<size_t>(n), 0);
  auto visit = [&](int64_t i, bool online) {  // DP-means' rule for one point; returns its label
    const float* p = x + i * dim_;
    int32_t k = assign(p);
    if (sq_dist(p, &centres_[k * dim_], dim_) > lambda2 && modes() < max_modes_) {
      centres_.insert(centres_.end(), p, p + dim_);
      count.push_back(1.0);
      return static_cast<int32_t>(modes() - 1);
    }
    if (online) {
      count[k] += 1.0;
      for (int64_t j = 0; j < dim_; ++j)
        centres_[k * dim_ + j] += static_cast<float>((p[j] - centres_[k * dim_ + j]) / count[k]);
    }
    return k;
  };
  for (int64_t i = 1; i < n; ++i) label[i] = visit(i, true);
  for (int pass = 0; pass < refine_passes; ++pass) {
    std::vector<int32_t> next(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) next[i] = visit(i, false);
    // Centres = means of their points; modes left empty are dropped and the labels renumbered.
    std::vector<double> sum(centres_.size(), 0.0);
    std::vector<double> c(static_cast<size_t>(modes()), 0.0);
    for (int64_t i = 0; i < n; ++i) {
      c[next[i]] += 1.0;
      for (int64_t j = 0; j < dim_; ++j) sum[next[i] * dim_ + j] += x[i * dim_ + j];
    }
    std::vector<int32_t> renumber(c.size(), -1);
    std::vector<float> kept;
    for (size_t k = 0; k < c.size(); ++k)
      if (c[k] > 0) {
        renumber[k] = static_cast<int32_t>(kept.size() / dim_);
        for (int64_t j = 0; j < dim_; ++j) kept.push_back(static_cast<float>(sum[k * dim_ + j] / c[k]));
      }
    centres_ = std::move(kept);
    for (int32_t& l : next) l = renumber[l];
    bool same = next == label;
    label = std::move(next);
    if (same) break;
  }
  return label;
}

std::vector<float> ModeClusters::to_vector() const {
  std::vector<float> v(static_cast<size_t>(max_modes_ * dim_ + 1), 0.f);
  std::copy(centres_.begin(), centres_.end(), v.begin());
  v.back() = static_cast<float>(modes());
  return v;
}

void ModeClusters::from_vector(const std::vector<float>& v) {
  TEMPER_CHECK(static_cast<int64_t>(v.size()) == max_modes_ * dim_ + 1)
      << "mode clusters: " << v.size() << " values, expected " << max_modes_ * dim_ + 1 << " (max_modes " << max_modes_
      << " x dim " << dim_ << " + count)";
  int64_t m = static_cast<int64_t>(v.back());
  TEMPER_CHECK(m >= 0 && m <= max_modes_) << "mode clusters: mode count " << m << " outside 0.." << max_modes_;
  centres_.assign(v.begin(), v.begin() + m * dim_);
}

double adjusted_rand_index(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
  TEMPER_CHECK(a.size() == b.size()) << "adjusted Rand index: " << a.size() << " vs " << b.size() << " labels";
  std::map<std::pair<int32_t, int32_t>, double> nij;
  std::map<int32_t, double> na, nb;
  for (size_t i = 0; i < a.size(); ++i) nij[{a[i], b[i]}] += 1, na[a[i]] += 1, nb[b[i]] += 1;
  auto c2 = [](double x) { return x * (x - 1) / 2; };
  double sij = 0, sa = 0, sb = 0;
  for (auto& [k, v] : nij) sij += c2(v);
  for (auto& [k, v] : na) sa += c2(v);
  for (auto& [k, v] : nb) sb += c2(v);
  double expected = sa * sb / c2(double(a.size())), max = (sa + sb) / 2;
  if (max == expected) return 1.0;  // both labelings one cluster (or all singletons): identical partitions
  return (sij - expected) / (max - expected);
}

}  // namespace temper::control
