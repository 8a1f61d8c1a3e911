// Frozen features and sample metrics (flow/linalg, frechet, mmd, density_grid, toy2d, fourier_features):
// closed forms, known densities, determinism.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numbers>

#include "temper/core/error.h"
#include "temper/core/rng.h"
#include "temper/flow/density_grid.h"
#include "temper/flow/fourier_features.h"
#include "temper/flow/frechet.h"
#include "temper/flow/linalg.h"
#include "temper/flow/mmd.h"
#include "temper/flow/toy2d.h"

namespace temper::flow {
namespace {

// A random symmetric PSD matrix Q diag(l) Q^T with known eigenvalues l (Q from Gram-Schmidt on normals).
std::vector<double> psd_with(const std::vector<double>& l, uint64_t seed) {
  const auto n = static_cast<int64_t>(l.size());
  std::vector<double> q(static_cast<size_t>(n * n));
  Rng rng(seed);
  for (auto& x : q) x = rng.normal();
  for (int64_t j = 0; j < n; ++j) {  // columns orthonormal
    for (int64_t k = 0; k < j; ++k) {
      double d = 0;
      for (int64_t i = 0; i < n; ++i) d += q[i * n + j] * q[i * n + k];
      for (int64_t i = 0; i < n; ++i) q[i * n + j] -= d * q[i * n + k];
    }
    double norm = 0;
    for (int64_t i = 0; i < n; ++i) norm += q[i * n + j] * q[i * n + j];
    for (int64_t i = 0; i < n; ++i) q[i * n + j] /= std::sqrt(norm);
  }
  std::vector<double> a(static_cast<size_t>(n * n), 0.0);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j)
      for (int64_t k = 0; k < n; ++k) a[i * n + j] += q[i * n + k] * l[static_cast<size_t>(k)] * q[j * n + k];
  return a;
}

TEST(FlowLinalg, EigenFindsKnownEigenvaluesAndTheSquareRootSquaresBack) {
  const std::vector<double> l{0.0, 0.5, 1.0, 2.0, 3.5, 7.0, 11.0};
  const int64_t n = 7;
  const auto a = psd_with(l, 3);
  const SymEigen e = sym_eigen(a, n);
  for (int64_t k = 0; k < n; ++k) EXPECT_NEAR(e.values[static_cast<size_t>(k)], l[static_cast<size_t>(k)], 1e-12);
  const auto r = sym_sqrt(a, n);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (int64_t k = 0; k < n; ++k) s += r[i * n + k] * r[k * n + j];
      EXPECT_NEAR(s, a[i * n + j], 1e-11) << i << "," << j;
    }
  const std::vector<double> b{1, 2, 3, 4, 5, 6, 7};
  auto spd = psd_with({1, 2, 3, 4, 5, 6, 7}, 5);
  const auto x = cholesky_solve(spd, b, n, "test");
  for (int64_t i = 0; i < n; ++i) {
    double s = 0;
    for (int64_t j = 0; j < n; ++j) s += spd[i * n + j] * x[static_cast<size_t>(j)];
    EXPECT_NEAR(s, b[static_cast<size_t>(i)], 1e-10);
  }
  EXPECT_THROW(cholesky_solve({1, 2, 2, 1}, {1, 1}, 2, "indefinite"), Error);  // eigenvalues 3 and -1
}

TEST(FlowLinalg, EigenOfALargerMatrixWithRepeatedValues) {
  std::vector<double> l;
  for (int k = 0; k < 90; ++k) l.push_back(k < 30 ? 1.0 : 0.1 * k);  // 30 equal eigenvalues
  const int64_t n = 90;
  const auto a = psd_with(l, 21);
  const SymEigen e = sym_eigen(a, n);
  std::sort(l.begin(), l.end());
  for (int64_t k = 0; k < n; ++k) EXPECT_NEAR(e.values[static_cast<size_t>(k)], l[static_cast<size_t>(k)], 1e-11);
  for (int64_t k : {0, 29, 45, 89}) {  // A v = lambda v, |v| = 1
    double norm = 0;
    for (int64_t i = 0; i < n; ++i) {
      double av = 0;
      for (int64_t j = 0; j < n; ++j) av += a[i * n + j] * e.vectors[j * n + k];
      EXPECT_NEAR(av, e.values[static_cast<size_t>(k)] * e.vectors[i * n + k], 1e-11);
      norm += e.vectors[i * n + k] * e.vectors[i * n + k];
    }
    EXPECT_NEAR(norm, 1.0, 1e-12);
  }
}

TEST(FlowMetrics, FrechetDistanceMatchesTheClosedFormOfTwoGaussians) {
  // Commuting covariances S_a = Q diag(la) Q^T, S_b = Q diag(lb) Q^T: tr(S_a + S_b - 2 (S_a S_b)^1/2) =
  // sum (sqrt(la) - sqrt(lb))^2.
  const std::vector<double> la{0.5, 1, 2, 4}, lb{2, 1, 0.25, 9};
  FeatureGaussian a, b;
  a.dim = b.dim = 4;
  a.mean = {0, 1, 2, 3}, b.mean = {1, 1, 0, 3};
  a.cov = psd_with(la, 9), b.cov = psd_with(lb, 9);
  double want = 1 + 4;
  for (size_t k = 0; k < 4; ++k) want += std::pow(std::sqrt(la[k]) - std::sqrt(lb[k]), 2);
  EXPECT_NEAR(frechet_distance(a, b), want, 1e-10);
  EXPECT_NEAR(frechet_distance(a, a), 0.0, 1e-10);
  // Non-commuting 2 x 2: S_a = I, so tr (S_b)^1/2 = sum sqrt(eig(S_b)).
  FeatureGaussian c, d;
  c.dim = d.dim = 2, c.mean = d.mean = {0, 0};
  c.cov = {1, 0, 0, 1}, d.cov = {2, 1, 1, 2};  // eigenvalues 1 and 3
  EXPECT_NEAR(frechet_distance(c, d), 2 + 4 - 2 * (1 + std::sqrt(3.0)), 1e-12);
}

TEST(FlowMetrics, FeatureGaussianIsNumpysMeanAndUnbiasedCovariance) {
  const std::vector<float> f{1, 2, 3, 5, 2, 2, 0, 1};  // 4 rows of 2
  const FeatureGaussian g = feature_gaussian(f.data(), 4, 2);
  EXPECT_DOUBLE_EQ(g.mean[0], 1.5);
  EXPECT_DOUBLE_EQ(g.mean[1], 2.5);
  // numpy.cov([[1,3,2,0],[2,5,2,1]]) = [[5/3, 2], [2, 3]]
  EXPECT_NEAR(g.cov[0], 5.0 / 3, 1e-12);
  EXPECT_NEAR(g.cov[1], 2.0, 1e-12);
  EXPECT_NEAR(g.cov[3], 3.0, 1e-12);
}

TEST(FlowMetrics, MmdAndPrecisionRecallSeparateShiftedSetsAndNotEqualOnes) {
  Toy2d data({});
  const auto a = data.sample_class(600, -1, 1), b = data.sample_class(600, -1, 2);
  std::vector<float> shifted(b);
  for (size_t i = 0; i < shifted.size(); i += 2) shifted[i] += 1.5f;
  const MmdResult same = mmd_rbf(a.data(), 600, b.data(), 600, 2, 1.0);
  const MmdResult diff = mmd_rbf(a.data(), 600, shifted.data(), 600, 2, 1.0);
  EXPECT_LT(std::abs(same.mmd2), 0.005);
  EXPECT_GT(diff.mmd2, 0.05);
  EXPECT_GT(mmd_rbf(a.data(), 600, b.data(), 600, 2).bandwidth, 1.0);  // the median heuristic
  const PrecisionRecall pr_same = precision_recall(a.data(), 600, b.data(), 600, 2);
  EXPECT_GT(pr_same.precision, 0.9);
  EXPECT_GT(pr_same.recall, 0.9);
  // Generated samples on half the modes: precise, but half the real set is not recalled.
  Toy2dConfig labelled;
  labelled.classes = 8;
  std::vector<float> all, half;
  std::vector<int32_t> mode;
  Toy2d(labelled).sample(1200, 2, all, mode);
  for (size_t i = 0; i < mode.size(); ++i)
    if (mode[i] < 4) half.insert(half.end(), {all[2 * i], all[2 * i + 1]});
  const auto m = static_cast<int64_t>(half.size() / 2);
  const PrecisionRecall pr_half = precision_recall(a.data(), 600, half.data(), m, 2);
  EXPECT_GT(pr_half.precision, 0.9);
  EXPECT_LT(pr_half.recall, 0.6);
}

TEST(FlowData, ToyDensitiesIntegrateToOneAndSamplesFollowThem) {
  for (const char* kind : {"gaussians", "rings", "spirals"}) {
    Toy2dConfig c;
    c.kind = kind, c.modes = 4, c.classes = 2, c.weights = "1,2,3,4";
    const Toy2d d(c);
    const double half = grid_half_width(c), h = 2 * half / 400;
    double mass = 0, mass0 = 0;
    for (int i = 0; i < 400; ++i)
      for (int j = 0; j < 400; ++j) {
        const double x = -half + (i + 0.5) * h, y = -half + (j + 0.5) * h;
        mass += std::exp(d.log_density(x, y)) * h * h;
        mass0 += std::exp(d.log_density(x, y, 0)) * h * h;
      }
    EXPECT_NEAR(mass, 1.0, 2e-3) << kind;
    EXPECT_NEAR(mass0, 1.0, 2e-3) << kind;
    EXPECT_NEAR(d.class_prob(0), 0.4, 1e-12) << kind;  // modes 0 and 2: (1 + 3) / 10
    std::vector<float> x, x2;
    std::vector<int32_t> y, y2;
    d.sample(4000, 7, x, y);
    d.sample(4000, 7, x2, y2);
    EXPECT_EQ(x, x2) << kind;
    EXPECT_EQ(y, y2) << kind;
    const GridDistance own = density_distance(d, x.data(), 4000, -1, 32);
    EXPECT_LT(own.tv, 0.2) << kind;
    std::vector<float> shifted(x);
    for (size_t i = 0; i < shifted.size(); i += 2) shifted[i] += 1.0f;
    EXPECT_GT(density_distance(d, shifted.data(), 4000, -1, 32).tv, own.tv + 0.1) << kind;
    const auto cls = d.sample_class(2000, 1, 3);
    const double cls_tv = density_distance(d, cls.data(), 2000, 1, 32).tv;
    EXPECT_LT(cls_tv, 0.25) << kind;
    EXPECT_GT(density_distance(d, cls.data(), 2000, 0, 32).tv, cls_tv + 0.2) << kind;  // the other class's modes
  }
}

TEST(FlowData, LabelsAloneAreTheLabelsOfTheSamples) {
  for (const char* kind : {"gaussians", "rings", "spirals"}) {
    Toy2dConfig c;
    c.kind = kind;
    c.classes = 3;
    c.weights = "1,2,3,4,1,2,3,4";
    const Toy2d d(c);
    std::vector<float> x;
    std::vector<int32_t> y;
    d.sample(500, 17, x, y);
    EXPECT_EQ(d.labels(500, 17), y) << kind;
    EXPECT_NE(d.labels(500, 18), y) << kind;
  }
}

TEST(FlowFeatures, FourierFeaturesApproximateTheRbfKernelAndAreFixedBySeed) {
  FourierFeaturesConfig c;
  c.dim = 4096, c.lengthscale = 0.7;
  const FourierFeatures f(c), g(c);
  const std::vector<float> x{0.1f, -0.3f, 0.6f, 0.2f};
  std::vector<float> a(static_cast<size_t>(2 * c.dim)), b(a.size());
  f.embed(x.data(), 2, a.data());
  g.embed(x.data(), 2, b.data());
  EXPECT_EQ(a, b);
  double k = 0;
  for (int64_t j = 0; j < c.dim; ++j)
    k += static_cast<double>(a[static_cast<size_t>(j)]) * a[static_cast<size_t>(c.dim + j)];
  const double d2 = 0.5 * 0.5 + 0.5 * 0.5;
  EXPECT_NEAR(k, std::exp(-d2 / (2 * 0.7 * 0.7)), 0.03);
  EXPECT_EQ(embed_all(f, x).size(), a.size());
  EXPECT_THROW(embed_all(f, std::vector<float>{1, 2, 3}), Error);
}

}  // namespace
}  // namespace temper::flow
