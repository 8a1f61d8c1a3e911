#include "temper/flow/fourier_features.h"

#include <cmath>
#include <numbers>

#include "temper/core/error.h"
#include "temper/core/rng.h"

namespace temper::flow {

FourierFeatures::FourierFeatures(FourierFeaturesConfig c) : cfg_(c) {
  TEMPER_CHECK(c.in_dim > 0 && c.dim > 0 && c.lengthscale > 0)
      << "fourier features: in_dim, dim and lengthscale must be > 0 (got " << c.in_dim << ", " << c.dim << ", "
      << c.lengthscale << ")";
  Rng rng(c.seed, 0);
  w_.resize(static_cast<size_t>(c.dim * c.in_dim));
  b_.resize(static_cast<size_t>(c.dim));
  for (auto& w : w_) w = static_cast<double>(rng.normal()) / c.lengthscale;
  for (auto& b : b_) b = 2 * std::numbers::pi * rng.uniform_f64();
}

void FourierFeatures::embed(const float* x, int64_t B, float* out) const {
  const int64_t D = cfg_.dim, K = cfg_.in_dim;
  const double scale = std::sqrt(2.0 / static_cast<double>(D));
  for (int64_t i = 0; i < B; ++i) {
    const float* xi = x + i * K;
    for (int64_t j = 0; j < D; ++j) {
      const double* wj = w_.data() + j * K;
      double s = b_[static_cast<size_t>(j)];
      for (int64_t k = 0; k < K; ++k) s += wj[k] * xi[k];
      out[i * D + j] = static_cast<float>(scale * std::cos(s));
    }
  }
}

}  // namespace temper::flow
