// Pareto sets and hypervolume against hand-computed values and the inclusion-exclusion reference.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "temper/core/error.h"
#include "temper/core/rng.h"
#include "temper/tabular/hypervolume.h"
#include "temper/tabular/pareto.h"

namespace temper::tabular {
namespace {

TEST(TabularPareto, FilterKeepsNonDominatedInCanonicalOrder) {
  // (1,3) (3,1) (2,2) are non-dominated; (1,1) and (2,1) are dominated; (3,1) appears twice.
  const std::vector<double> pts = {1, 1, 1, 3, 2, 1, 3, 1, 2, 2, 3, 1};
  const std::vector<double> nd = pareto_filter<double>(pts, 2);
  EXPECT_EQ(nd, (std::vector<double>{3, 1, 2, 2, 1, 3}));
  EXPECT_TRUE(is_non_dominated<double>(nd, 2));
  EXPECT_FALSE(is_non_dominated<double>(pts, 2));
  // Order-independent: the same set shuffled gives the same bits.
  const std::vector<double> shuffled = {2, 2, 3, 1, 1, 1, 1, 3, 3, 1, 2, 1};
  EXPECT_EQ(pareto_filter<double>(shuffled, 2), nd);
}

TEST(TabularPareto, DominanceNeedsOneStrictCoordinate) {
  const double a[3] = {1, 2, 3}, b[3] = {1, 2, 3}, c[3] = {1, 2, 2};
  EXPECT_FALSE(dominates(a, b, 3));
  EXPECT_TRUE(dominates(a, c, 3));
  EXPECT_FALSE(dominates(c, a, 3));
}

TEST(TabularPareto, EpsilonPruningAndCap) {
  const std::vector<double> nd =
      pareto_filter<double>(std::vector<double>{1.0, 0.0, 0.98, 0.05, 0.5, 0.5, 0.0, 1.0}, 2);
  // (0.98, 0.05) is within 0.06 of (1, 0): covered; the others are not.
  EXPECT_EQ(pareto_prune_epsilon<double>(nd, 2, 0.06), (std::vector<double>{1.0, 0.0, 0.5, 0.5, 0.0, 1.0}));
  EXPECT_EQ(pareto_prune_epsilon<double>(nd, 2, 0.0), nd);
  // Cap 3: the extremes stay (infinite crowding); of the two inner points (0.98, 0.05) is the more crowded.
  EXPECT_EQ(pareto_prune_cap<double>(nd, 2, 3), (std::vector<double>{1.0, 0.0, 0.5, 0.5, 0.0, 1.0}));
  EXPECT_EQ(pareto_prune_cap<double>(nd, 2, 0), nd);
}

TEST(TabularHypervolume, HandComputed2D3D) {
  const double ref2[2] = {0, 0};
  // Staircase (3,1) (2,2) (1,3): 3*1 + 2*1 + 1*1 = 6.
  EXPECT_DOUBLE_EQ(hypervolume(std::vector<double>{3, 1, 2, 2, 1, 3}, 2, ref2), 6.0);
  // A dominated point adds nothing; a point below the reference adds nothing.
  EXPECT_DOUBLE_EQ(hypervolume(std::vector<double>{3, 1, 2, 2, 1, 3, 1, 1, -1, 5}, 2, ref2), 6.0);
  const double ref2b[2] = {-1, -1};
  EXPECT_DOUBLE_EQ(hypervolume(std::vector<double>{1, 1}, 2, ref2b), 4.0);
  const double ref3[3] = {0, 0, 0};
  // Two boxes 2x1x1 and 1x2x2 overlapping in 1x1x1: 2 + 4 - 1 = 5.
  EXPECT_DOUBLE_EQ(hypervolume(std::vector<double>{2, 1, 1, 1, 2, 2}, 3, ref3), 5.0);
  // Three unit-corner points of the simplex (1,0,0)... on ref -1: each box 2x1x1 = 2, pairwise overlaps 1x1x1 = 1,
  // triple overlap 1: 3*2 - 3*1 + 1 = 4.
  const double ref3b[3] = {-1, -1, -1};
  EXPECT_DOUBLE_EQ(hypervolume(std::vector<double>{1, 0, 0, 0, 1, 0, 0, 0, 1}, 3, ref3b), 4.0);
  const double ref1[1] = {0};
  EXPECT_DOUBLE_EQ(hypervolume(std::vector<double>{0.5, 2, 1}, 1, ref1), 2.0);
  EXPECT_DOUBLE_EQ(hypervolume(std::vector<double>{}, 3, ref3), 0.0);
}

TEST(TabularHypervolume, MatchesInclusionExclusionUpTo5D) {
  Rng rng(7, 3);
  for (int D = 2; D <= 5; ++D)
    for (int trial = 0; trial < 20; ++trial) {
      const int n = 1 + static_cast<int>(rng.next_u32() % 9);
      std::vector<double> pts(n * D);
      for (double& x : pts) x = std::floor(rng.uniform_f64() * 8) / 4 - 0.25;  // ties and points below the reference
      const std::vector<double> ref(D, 0.0);
      const double fast = hypervolume(pts, D, ref), slow = hypervolume_inclusion_exclusion(pts, D, ref);
      EXPECT_NEAR(fast, slow, 1e-12 * std::max(1.0, slow)) << "D=" << D << " trial " << trial;
    }
}

TEST(TabularHypervolume, RefusesMismatchedReference) {
  const double ref[2] = {0, 0};
  EXPECT_THROW(hypervolume(std::vector<double>{1, 1, 1}, 3, std::span<const double>(ref, 2)), Error);
}

}  // namespace
}  // namespace temper::tabular
