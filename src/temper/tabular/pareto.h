// Pareto sets of return vectors (every objective maximised): dominance, the non-dominated filter, and the two
// prunings that keep PQL's sets bounded (epsilon-dominance, a size cap by crowding distance). Points are rows
// of a flat row-major array [n, D]. Results come in one canonical order (lexicographically descending, exact
// duplicates merged) so a set's bits do not depend on the order its points arrived in.
// Leaves out: approximate or fast (kd-tree) filters; sets here hold tens of points.
// Follows Van Moffaert & Nowe, "Multi-objective RL using sets of Pareto dominating policies" (JMLR 2014).
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <numeric>
#include <span>
#include <vector>

namespace temper::tabular {

// a dominates b: a_i >= b_i for all i and a_j > b_j for some j.
template <class T>
bool dominates(const T* a, const T* b, int D) {
  bool strict = false;
  for (int i = 0; i < D; ++i) {
    if (a[i] < b[i]) return false;
    if (a[i] > b[i]) strict = true;
  }
  return strict;
}

// Row order: lexicographically descending over the D coordinates.
template <class T>
std::vector<int64_t> pareto_order(std::span<const T> pts, int D) {
  const int64_t n = static_cast<int64_t>(pts.size()) / D;
  std::vector<int64_t> idx(n);
  std::iota(idx.begin(), idx.end(), 0);
  std::sort(idx.begin(), idx.end(), [&](int64_t x, int64_t y) {
    return std::lexicographical_compare(pts.data() + y * D, pts.data() + y * D + D, pts.data() + x * D,
                                        pts.data() + x * D + D);
  });
  return idx;
}

// The rows of pts that no other row dominates, duplicates merged, in canonical order.
template <class T>
std::vector<T> pareto_filter(std::span<const T> pts, int D) {
  std::vector<T> out;
  const std::vector<int64_t> order = pareto_order(pts, D);
  for (int64_t i : order) {
    const T* p = pts.data() + i * D;
    bool keep = true;
    // A row can only be dominated by one earlier in descending lexicographic order (or equal it).
    for (size_t k = 0; k < out.size() && keep; k += D)
      if (dominates(out.data() + k, p, D) || std::equal(p, p + D, out.data() + k)) keep = false;
    if (keep) out.insert(out.end(), p, p + D);
  }
  return out;
}

// Epsilon-dominance pruning of a canonical non-dominated set: walking it in order, a row is dropped when a row
// kept before it is within eps of covering it (q_i >= p_i - eps for every i). eps <= 0 keeps the set.
template <class T>
std::vector<T> pareto_prune_epsilon(std::span<const T> set, int D, double eps) {
  if (eps <= 0) return {set.begin(), set.end()};
  std::vector<T> out;
  for (size_t k = 0; k < set.size(); k += D) {
    const T* p = set.data() + k;
    bool covered = false;
    for (size_t j = 0; j < out.size() && !covered; j += D) {
      bool all = true;
      for (int i = 0; i < D && all; ++i) all = static_cast<double>(out[j + i]) >= static_cast<double>(p[i]) - eps;
      covered = all;
    }
    if (!covered) out.insert(out.end(), p, p + D);
  }
  return out;
}

// Crowding distance of each row (NSGA-II): per objective, the rows sorted by it, the extremes infinite, the rest
// the gap between their neighbours over the objective's range.
template <class T>
std::vector<double> crowding_distance(std::span<const T> set, int D) {
  const int64_t n = static_cast<int64_t>(set.size()) / D;
  std::vector<double> dist(n, 0.0);
  std::vector<int64_t> idx(n);
  for (int d = 0; d < D; ++d) {
    std::iota(idx.begin(), idx.end(), 0);
    std::stable_sort(idx.begin(), idx.end(), [&](int64_t a, int64_t b) { return set[a * D + d] < set[b * D + d]; });
    const double lo = set[idx.front() * D + d], hi = set[idx.back() * D + d];
    dist[idx.front()] = dist[idx.back()] = std::numeric_limits<double>::infinity();
    if (hi <= lo) continue;
    for (int64_t k = 1; k + 1 < n; ++k)
      dist[idx[k]] += (static_cast<double>(set[idx[k + 1] * D + d]) - set[idx[k - 1] * D + d]) / (hi - lo);
  }
  return dist;
}

// Keeps at most cap rows (cap <= 0: all): repeatedly drops the row with the smallest crowding distance (the
// later row on ties), recomputing the distances after each drop. The order of the kept rows is unchanged.
template <class T>
std::vector<T> pareto_prune_cap(std::span<const T> set, int D, int64_t cap) {
  std::vector<T> out(set.begin(), set.end());
  while (cap > 0 && static_cast<int64_t>(out.size()) / D > cap) {
    const std::vector<double> dist = crowding_distance<T>(out, D);
    int64_t worst = 0;
    for (int64_t i = 1; i < static_cast<int64_t>(dist.size()); ++i)
      if (dist[i] <= dist[worst]) worst = i;
    out.erase(out.begin() + worst * D, out.begin() + worst * D + D);
  }
  return out;
}

// True when no row of set dominates another and no two rows are equal.
template <class T>
bool is_non_dominated(std::span<const T> set, int D) {
  const size_t n = set.size() / D;
  for (size_t i = 0; i < n; ++i)
    for (size_t j = 0; j < n; ++j)
      if (i != j &&
          (dominates(&set[i * D], &set[j * D], D) || (i < j && std::equal(&set[i * D], &set[i * D] + D, &set[j * D]))))
        return false;
  return true;
}

}  // namespace temper::tabular
