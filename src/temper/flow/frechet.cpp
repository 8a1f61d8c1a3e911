#include "temper/flow/frechet.h"

#include <cmath>

#include "temper/core/error.h"
#include "temper/core/thread_pool.h"
#include "temper/flow/linalg.h"

namespace temper::flow {

FeatureGaussian feature_gaussian(const float* f, int64_t n, int64_t dim) {
  TEMPER_CHECK(n >= 2 && dim > 0) << "frechet distance: needs at least 2 feature rows of dim > 0 (got " << n << " of "
                                  << dim << ")";
  FeatureGaussian g;
  g.dim = dim, g.count = n;
  g.mean.assign(static_cast<size_t>(dim), 0.0);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < dim; ++j) g.mean[static_cast<size_t>(j)] += f[i * dim + j];
  for (auto& m : g.mean) m /= static_cast<double>(n);
  g.cov.assign(static_cast<size_t>(dim * dim), 0.0);
  parallel_for(dim, 8, [&](int64_t b, int64_t e) {  // rows b..e of the covariance, each summed in a fixed order
    std::vector<double> c(static_cast<size_t>(dim));
    for (int64_t i = 0; i < n; ++i) {
      const float* fi = f + i * dim;
      for (int64_t j = 0; j < dim; ++j) c[static_cast<size_t>(j)] = fi[j] - g.mean[static_cast<size_t>(j)];
      for (int64_t r = b; r < e; ++r) {
        const double cr = c[static_cast<size_t>(r)];
        double* row = g.cov.data() + r * dim;
        for (int64_t j = 0; j < dim; ++j) row[j] += cr * c[static_cast<size_t>(j)];
      }
    }
  });
  for (auto& c : g.cov) c /= static_cast<double>(n - 1);
  return g;
}

double frechet_distance(const FeatureGaussian& a, const FeatureGaussian& b) {
  TEMPER_CHECK(a.dim == b.dim && a.dim > 0)
      << "frechet distance: feature dims differ (" << a.dim << " vs " << b.dim << ")";
  const int64_t d = a.dim;
  double mean_term = 0, trace = 0;
  for (int64_t j = 0; j < d; ++j) {
    const double diff = a.mean[static_cast<size_t>(j)] - b.mean[static_cast<size_t>(j)];
    mean_term += diff * diff;
    trace += a.cov[j * d + j] + b.cov[j * d + j];
  }
  const std::vector<double> ra = sym_sqrt(a.cov, d);
  std::vector<double> tmp(static_cast<size_t>(d * d), 0.0), m(static_cast<size_t>(d * d), 0.0);
  for (int64_t i = 0; i < d; ++i)  // tmp = ra * S_b
    for (int64_t k = 0; k < d; ++k) {
      const double r = ra[i * d + k];
      for (int64_t j = 0; j < d; ++j) tmp[i * d + j] += r * b.cov[k * d + j];
    }
  for (int64_t i = 0; i < d; ++i)  // m = tmp * ra
    for (int64_t k = 0; k < d; ++k) {
      const double t = tmp[i * d + k];
      for (int64_t j = 0; j < d; ++j) m[i * d + j] += t * ra[k * d + j];
    }
  double root_trace = 0;
  for (double l : sym_eigen(m, d).values) root_trace += std::sqrt(std::max(l, 0.0));
  return mean_term + trace - 2 * root_trace;
}

}  // namespace temper::flow
