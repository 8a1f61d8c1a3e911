// Fixed random Fourier features (Rahimi & Recht 2007): phi(x) = sqrt(2/D) cos(W x + b), W ~ N(0, 1/l^2),
// b ~ U(0, 2 pi), drawn once from a seed (Philox) and never trained: the "frozen pretrained embedding
// space" of the spec's 2-D miniature (methods-other section 4). Inner products approximate the RBF kernel
// exp(-|x - x'|^2 / (2 l^2)), so a linear head on them is a kernel logistic regression.
#pragma once

#include <cstdint>
#include <vector>

#include "temper/flow/features.h"

namespace temper::flow {

struct FourierFeaturesConfig {
  int64_t in_dim = 2;
  int64_t dim = 128;         // D
  double lengthscale = 1.0;  // l
  uint64_t seed = 1234;
};

class FourierFeatures final : public Features {
 public:
  explicit FourierFeatures(FourierFeaturesConfig c);
  std::string name() const override { return "fourier"; }
  int64_t in_dim() const override { return cfg_.in_dim; }
  int64_t dim() const override { return cfg_.dim; }
  void embed(const float* x, int64_t B, float* out) const override;

 private:
  FourierFeaturesConfig cfg_;
  std::vector<double> w_, b_;  // W [D, in_dim], b [D]
};

}  // namespace temper::flow
