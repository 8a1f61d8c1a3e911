// Generalized Gini welfare: the weights, permutation invariance, concavity (midpoints over random
// pairs), the mean and the minimum at the extreme weights, and the supergradient (equality at the
// point, an upper bound everywhere else).
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "temper/core/error.h"
#include "temper/rl/welfare.h"

using namespace temper;
using namespace temper::rl;

TEST(Welfare, WeightsAreNormalisedAndStrictlyDecreasing) {
  std::vector<double> lin = ggf_weights(3, "linear"), geo = ggf_weights(3, "geometric");
  EXPECT_NEAR(lin[0], 3.0 / 6, 1e-15);
  EXPECT_NEAR(lin[1], 2.0 / 6, 1e-15);
  EXPECT_NEAR(lin[2], 1.0 / 6, 1e-15);
  EXPECT_NEAR(geo[0], 4.0 / 7, 1e-15);
  EXPECT_NEAR(geo[2], 1.0 / 7, 1e-15);
  EXPECT_NO_THROW(check_ggf_weights(lin, "w"));
  EXPECT_THROW(check_ggf_weights({0.5, 0.5}, "w"), Error);
  EXPECT_THROW(check_ggf_weights({0.2, 0.8}, "w"), Error);
  EXPECT_THROW(check_ggf_weights({1.0, 0.0}, "w"), Error);
  EXPECT_THROW(ggf_weights(2, "flat"), Error);
}

TEST(Welfare, HandValuesAndExtremes) {
  const std::vector<double> w = {0.5, 0.3, 0.2}, v = {0.9, 0.1, 0.4};
  EXPECT_NEAR(ggf(w, v), 0.5 * 0.1 + 0.3 * 0.4 + 0.2 * 0.9, 1e-15);
  EXPECT_NEAR(ggf({1.0 / 3, 1.0 / 3, 1.0 / 3}, v), (0.9 + 0.1 + 0.4) / 3, 1e-15);  // uniform: the mean
  EXPECT_NEAR(ggf({1.0, 0.0, 0.0}, v), 0.1, 1e-15);                               // (1, 0, 0): the minimum
  EXPECT_THROW(ggf(w, {1.0, 2.0}), Error);
}

TEST(Welfare, PermutationInvariantConcaveWithASupergradient) {
  std::mt19937_64 gen(7);
  std::uniform_real_distribution<double> u(-1, 2);
  for (int64_t D : {2, 3, 5})
    for (const char* kind : {"linear", "geometric"}) {
      const std::vector<double> w = ggf_weights(D, kind);
      for (int trial = 0; trial < 200; ++trial) {
        std::vector<double> a(static_cast<size_t>(D)), b(static_cast<size_t>(D)), m(static_cast<size_t>(D));
        for (auto& x : a) x = u(gen);
        for (auto& x : b) x = u(gen);
        for (size_t i = 0; i < m.size(); ++i) m[i] = 0.5 * (a[i] + b[i]);
        std::vector<double> p = a;
        std::shuffle(p.begin(), p.end(), gen);
        EXPECT_NEAR(ggf(w, p), ggf(w, a), 1e-12);
        EXPECT_GE(ggf(w, m), 0.5 * (ggf(w, a) + ggf(w, b)) - 1e-12);  // concave
        const std::vector<double> lam = ggf_supergradient(w, a);
        double at_a = 0, at_b = 0;
        for (size_t i = 0; i < a.size(); ++i) at_a += lam[i] * a[i], at_b += lam[i] * b[i];
        EXPECT_NEAR(at_a, ggf(w, a), 1e-12);  // equality at the point
        EXPECT_LE(ggf(w, b), at_b + 1e-12);   // an upper bound elsewhere
      }
    }
  // The worst-off objective gets the largest weight.
  EXPECT_EQ(ggf_supergradient({0.5, 0.3, 0.2}, {0.9, 0.1, 0.4}), (std::vector<double>{0.2, 0.5, 0.3}));
}
