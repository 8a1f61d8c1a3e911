// The discriminator head: on 1-D Gaussians (real N(1, 1), generated N(-1, 1)) its logit recovers the
// known log density ratio 2x, with balanced and with 1:4 imbalanced classes (class weighting, no prior
// shift); the reward is clipped; the fitted head survives save/load; bad input is named.
#include <gtest/gtest.h>

#include <random>

#include "temper/core/error.h"
#include "temper/rl/discriminator.h"

using namespace temper;
using namespace temper::rl;

namespace {

std::vector<std::vector<float>> gauss(double mu, int n, std::mt19937_64& g) {
  std::normal_distribution<double> d(mu, 1.0);
  std::vector<std::vector<float>> out;
  for (int i = 0; i < n; ++i) out.push_back({static_cast<float>(d(g))});
  return out;
}

}  // namespace

TEST(Discriminator, LogitRecoversTheLogDensityRatio) {
  std::mt19937_64 g(3);
  for (int n_gen : {10000, 40000}) {  // balanced, then 4x more generated than real
    Discriminator d;
    auto real = gauss(1, 10000, g), gen = gauss(-1, n_gen, g);
    d.fit(real, gen);
    for (double x : {-1.5, -0.5, 0.0, 0.5, 1.5}) EXPECT_NEAR(d.logit({static_cast<float>(x)}), 2 * x, 0.15) << "x " << x << ", " << n_gen << " generated";
    EXPECT_NEAR(d.accuracy(real, gen), 0.841, 0.02);  // Phi(1): the Bayes rate
  }
}

TEST(Discriminator, RewardIsClippedAndTheHeadSurvivesSaveLoad) {
  std::mt19937_64 g(5);
  DiscriminatorConfig c;
  c.clip = 3;
  Discriminator d(c);
  d.fit(gauss(1, 500, g), gauss(-1, 500, g));
  EXPECT_EQ(d.reward({100.f}), 3);
  EXPECT_EQ(d.reward({-100.f}), -3);
  Discriminator e(c);
  e.load(d.save());
  for (float x : {-2.f, 0.3f, 4.f}) EXPECT_EQ(e.logit({x}), d.logit({x}));
  EXPECT_THROW(Discriminator().logit({1.f}), Error);  // not fitted
  EXPECT_THROW(d.logit({1.f, 2.f}), Error);
  EXPECT_THROW(d.fit({{1.f}}, {}), Error);
  EXPECT_THROW(e.load("x"), Error);
}
