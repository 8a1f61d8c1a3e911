// Hypervolume by a 2-D sweep and slicing along the last objective (see hypervolume.h).
#include "temper/tabular/hypervolume.h"

#include <algorithm>
#include <cstdint>
#include <numeric>

#include "temper/core/error.h"

namespace temper::tabular {
namespace {

// 2-D: rows sorted by x descending; each adds the strip between its y and the best y so far.
double hv2(std::vector<std::pair<double, double>> p, double rx, double ry) {
  std::sort(p.begin(), p.end(),
            [](auto& a, auto& b) { return a.first > b.first || (a.first == b.first && a.second > b.second); });
  double vol = 0, best_y = ry;
  for (const auto& [x, y] : p) {
    if (y > best_y) {
      vol += (x - rx) * (y - best_y);
      best_y = y;
    }
  }
  return vol;
}

// Rows already strictly above ref in every objective.
double hv_rec(const std::vector<double>& pts, int D, const double* ref) {
  const int64_t n = static_cast<int64_t>(pts.size()) / D;
  if (n == 0) return 0.0;
  if (D == 1) {
    double m = ref[0];
    for (double x : pts) m = std::max(m, x);
    return m - ref[0];
  }
  if (D == 2) {
    std::vector<std::pair<double, double>> p(n);
    for (int64_t i = 0; i < n; ++i) p[i] = {pts[i * 2], pts[i * 2 + 1]};
    return hv2(std::move(p), ref[0], ref[1]);
  }
  // Slice along the last objective, from the top: between consecutive levels the slab's cross-section is the
  // (D-1)-dimensional hypervolume of the rows at or above the slab.
  std::vector<int64_t> idx(n);
  std::iota(idx.begin(), idx.end(), 0);
  std::sort(idx.begin(), idx.end(), [&](int64_t a, int64_t b) { return pts[a * D + D - 1] > pts[b * D + D - 1]; });
  std::vector<double> active;
  double vol = 0;
  for (int64_t k = 0; k < n; ++k) {
    const double* p = &pts[idx[k] * D];
    active.insert(active.end(), p, p + D - 1);
    const double next = k + 1 < n ? pts[idx[k + 1] * D + D - 1] : ref[D - 1];
    const double depth = p[D - 1] - next;
    if (depth > 0) vol += hv_rec(active, D - 1, ref) * depth;
  }
  return vol;
}

std::vector<double> above_ref(std::span<const double> pts, int D, std::span<const double> ref) {
  TEMPER_CHECK(D >= 1) << "hypervolume: the number of objectives must be at least 1, got " << D;
  TEMPER_CHECK(static_cast<int>(ref.size()) == D)
      << "hypervolume: the reference point has " << ref.size() << " values, the points " << D << " objectives";
  TEMPER_CHECK(pts.size() % D == 0) << "hypervolume: " << pts.size() << " values is not a whole number of " << D
                                    << "-objective points";
  std::vector<double> out;
  for (size_t k = 0; k < pts.size(); k += D) {
    bool above = true;
    for (int i = 0; i < D; ++i) above = above && pts[k + i] > ref[i];
    if (above) out.insert(out.end(), pts.begin() + k, pts.begin() + k + D);
  }
  return out;
}

}  // namespace

double hypervolume(std::span<const double> pts, int D, std::span<const double> ref) {
  return hv_rec(above_ref(pts, D, ref), D, ref.data());
}

double hypervolume(std::span<const float> pts, int D, std::span<const double> ref) {
  std::vector<double> d(pts.begin(), pts.end());
  return hypervolume(std::span<const double>(d), D, ref);
}

double hypervolume_inclusion_exclusion(std::span<const double> pts, int D, std::span<const double> ref) {
  const std::vector<double> p = above_ref(pts, D, ref);
  const int64_t n = static_cast<int64_t>(p.size()) / D;
  TEMPER_CHECK(n <= 16) << "hypervolume_inclusion_exclusion: " << n << " points; the reference is for at most 16";
  double vol = 0;
  for (uint32_t mask = 1; mask < (1u << n); ++mask) {
    double box = 1;
    for (int i = 0; i < D; ++i) {
      double m = 1e300;
      for (int64_t j = 0; j < n; ++j)
        if (mask >> j & 1) m = std::min(m, p[j * D + i]);
      box *= m - ref[i];
    }
    vol += (__builtin_popcount(mask) % 2 ? 1 : -1) * box;
  }
  return vol;
}

}  // namespace temper::tabular
