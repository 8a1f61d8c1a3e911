// The two statistics both mode-cluster fits take of their points (mode_clusters.cpp: DP-means,
// stick_breaking.cpp: the variational mixture): the squared distance of a point to a centre, and the points'
// mean with their mean squared distance from it, in double whatever the centre's type.
#pragma once

#include <cstdint>
#include <vector>

namespace temper::control {

template <class T>
double sq_dist(const float* a, const T* b, int64_t d) {
  double s = 0;
  for (int64_t j = 0; j < d; ++j) s += (double(a[j]) - double(b[j])) * (double(a[j]) - double(b[j]));
  return s;
}

struct PointSpread {
  std::vector<double> mean;  // [d]
  double mean_sq = 0;        // mean over the points of |x_i - mean|^2 (summed over the d coordinates)
};

// x [n, d], n >= 1.
inline PointSpread point_spread(const float* x, int64_t n, int64_t d) {
  PointSpread s{std::vector<double>(static_cast<size_t>(d), 0.0), 0.0};
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < d; ++j) s.mean[j] += x[i * d + j] / double(n);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < d; ++j) s.mean_sq += (x[i * d + j] - s.mean[j]) * (x[i * d + j] - s.mean[j]) / double(n);
  return s;
}

}  // namespace temper::control
