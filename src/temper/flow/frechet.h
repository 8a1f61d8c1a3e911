// The Frechet distance between Gaussians fitted to two feature sets, FID's formula (Heusel et al. 2017):
// |mu_a - mu_b|^2 + tr(S_a + S_b - 2 (S_a S_b)^{1/2}), the trace of the root taken as
// tr((S_a^{1/2} S_b S_a^{1/2})^{1/2}) so that only symmetric eigen-decompositions are needed (linalg.h);
// covariances unbiased (n - 1), as numpy.cov and pytorch-fid. In double throughout.
#pragma once

#include <cstdint>
#include <vector>

namespace temper::flow {

struct FeatureGaussian {
  int64_t dim = 0, count = 0;
  std::vector<double> mean;  // [dim]
  std::vector<double> cov;   // [dim, dim]
};

// f: [n, dim] feature rows, n >= 2.
FeatureGaussian feature_gaussian(const float* f, int64_t n, int64_t dim);
double frechet_distance(const FeatureGaussian& a, const FeatureGaussian& b);

}  // namespace temper::flow
