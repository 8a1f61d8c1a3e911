// Pareto Q-learning against exact fronts: the learned ND-set at (start, u0) equals the true front, tracking
// realises each front vector, the scalarised baseline gives one point, counterfactual updates learn faster than
// learning on the cross-product, pruning bounds the sets, and runs are bitwise deterministic and resumable.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include "tabular/tabular_worlds.h"
#include "temper/tabular/ground_truth.h"
#include "temper/tabular/hypervolume.h"
#include "temper/tabular/pareto.h"
#include "temper/tabular/pareto_q.h"
#include "temper/tabular/scalar_q.h"
#include "temper/tabular/tracking.h"
#include "temper/tabular/trainer.h"

namespace temper::tabular {
namespace {

TabularConfig config_for(const ProductMdp& p, Method m, double gamma, double epsilon) {
  TabularConfig c;
  c.method = m;
  c.gamma = gamma;
  c.epsilon = epsilon;
  c.reference.assign(p.D, -0.1);
  c.weights.assign(p.D, 1.0);
  return c;
}

void train(TabularTrainer& t, int64_t steps) {
  for (int64_t i = 0; i < steps; ++i) t.step();
}

// Every ND set the learner holds is non-dominated (no dominated point kept anywhere).
void expect_sets_non_dominated(const ParetoQ& q, const ProductMdp& p) {
  for (int64_t s = 0; s < p.S(); ++s)
    for (int64_t u = 0; u < p.U; ++u)
      for (int64_t a = 0; a < p.A(); ++a) ASSERT_TRUE(is_non_dominated<float>(q.nd(s, u, a), p.D)) << s << " " << u;
}

struct Case {
  const char* name;
  ProductMdp p;
  double gamma;
  int64_t steps;
};

TEST(TabularPql, LearnedFrontEqualsTrueFrontAndTrackingRealisesIt) {
  std::vector<Case> cases;
  cases.push_back({"two_goal", test::two_goal_product(), 0.9, 2000});
  cases.push_back({"corridor", test::builtin_product("corridor", "office3"), 0.95, 20000});
  cases.push_back({"office_small", test::builtin_product("office_small", "office3_split"), 0.95, 60000});
  for (const Case& k : cases) {
    const std::vector<double> truth = true_front(k.p, k.gamma);
    TabularTrainer t(k.p, config_for(k.p, Method::pqlrm, k.gamma, 1.0), truth);
    train(t, k.steps);
    const std::vector<double> learned = t.front();
    const FrontMatch m = match_fronts(learned, truth, k.p.D, kFrontTolerance);
    EXPECT_EQ(m.missing, 0) << k.name;
    EXPECT_EQ(m.spurious, 0) << k.name;
    EXPECT_LT(m.worst, kFrontTolerance) << k.name;
    EXPECT_EQ(learned.size(), truth.size()) << k.name;
    const ParetoQ& q = dynamic_cast<const ParetoQ&>(t.learner());
    expect_sets_non_dominated(q, k.p);
    // Tracking: each front vector, rolled out, returns itself.
    for (size_t i = 0; i < learned.size(); i += k.p.D) {
      const std::vector<float> target(learned.begin() + i, learned.begin() + i + k.p.D);
      const TrackResult r = track(q, k.p, target, 100);
      EXPECT_TRUE(r.terminated) << k.name << " point " << i / k.p.D;
      for (int d = 0; d < k.p.D; ++d) EXPECT_NEAR(r.realised[d], target[d], 1e-5) << k.name << " point " << i / k.p.D;
    }
  }
}

TEST(TabularPql, ScalarisedQrmReturnsOnePointTheLinearOptimum) {
  const ProductMdp p = test::builtin_product("office_small", "office3");
  const std::vector<double> truth = true_front(p, 0.95);
  for (const std::vector<double>& w : {std::vector<double>{0.8, 0.1, 0.1}, {0.2, 0.2, 0.6}, {1, 1, 1}}) {
    TabularConfig c = config_for(p, Method::qrm, 0.95, 1.0);
    c.weights = w;
    TabularTrainer t(p, c, truth);
    train(t, 30000);
    const std::vector<double> f = t.front();
    ASSERT_EQ(f.size(), 3u);  // one point, whatever the weights
    EXPECT_NEAR(w[0] * f[0] + w[1] * f[1] + w[2] * f[2], scalar_optimum(p, 0.95, w), 1e-5);
    EXPECT_EQ(match_fronts(f, truth, 3, kFrontTolerance).recovered, 1);  // a point of the true front
    EXPECT_LT(hypervolume(std::span<const double>(f), 3, c.reference), t.truth_hypervolume());
  }
}

// Steps until the front's hypervolume reaches 95% of the true one (checked every 500 steps).
int64_t steps_to_95(const ProductMdp& p, Method m, const std::vector<double>& truth, int64_t limit) {
  TabularTrainer t(p, config_for(p, m, 0.95, 1.0), truth);
  while (t.steps() < limit) {
    train(t, 500);
    for (const auto& [k, v] : t.evaluate())
      if (k == "hv_ratio" && v >= 0.95) return t.steps();
  }
  return limit;
}

TEST(TabularPql, CounterfactualUpdatesLearnFasterThanTheCrossProduct) {
  const ProductMdp p = test::builtin_product("office_small", "office3");
  const std::vector<double> truth = true_front(p, 0.95);
  const int64_t rm = steps_to_95(p, Method::pqlrm, truth, 400000), cross = steps_to_95(p, Method::pql, truth, 400000);
  std::printf("steps to 95%% of the true hypervolume: pqlrm %lld, pql %lld\n", static_cast<long long>(rm),
              static_cast<long long>(cross));
  EXPECT_LT(rm, 60000);
  EXPECT_GT(cross, 3 * rm) << "pqlrm " << rm << " steps, pql " << cross;
}

TEST(TabularPql, PruningBoundsTheSets) {
  const ProductMdp p = test::builtin_product("office", "office3");
  TabularConfig c = config_for(p, Method::pqlrm, 0.95, 1.0);
  c.nd_cap = 2;
  TabularTrainer t(p, c);
  train(t, 20000);
  const ParetoQ& q = dynamic_cast<const ParetoQ&>(t.learner());
  int64_t biggest = 0;
  for (int64_t s = 0; s < p.S(); ++s)
    for (int64_t u = 0; u < p.U; ++u)
      for (int64_t a = 0; a < p.A(); ++a) biggest = std::max<int64_t>(biggest, q.nd(s, u, a).size() / 3);
  EXPECT_EQ(biggest, 2);
  // Epsilon-dominance with eps 1 merges every set to one vector (all returns lie in [0, 1]): one per (s, u, a)
  // updated with a non-terminal successor, none elsewhere.
  c.nd_cap = 0;
  c.nd_epsilon = 1.0;
  TabularTrainer e(p, c);
  train(e, 20000);
  const ParetoQ& qe = dynamic_cast<const ParetoQ&>(e.learner());
  int64_t ones = 0;
  for (int64_t s = 0; s < p.S(); ++s)
    for (int64_t u = 0; u < p.U; ++u)
      for (int64_t a = 0; a < p.A(); ++a) {
        const bool kept = qe.count(s, u, a) > 0 && !p.step(s, u, a).terminal;
        ASSERT_EQ(qe.nd(s, u, a).size(), kept ? 3u : 0u) << s << " " << u << " " << a;
        ones += kept;
      }
  EXPECT_GT(ones, 2000);
}

TEST(TabularPql, SameSeedSameBitsAndResumeIsBitwise) {
  const ProductMdp p = test::builtin_product("office_small", "office3_split");
  for (Method m : {Method::pqlrm, Method::pql, Method::qrm}) {
    const TabularConfig c = config_for(p, m, 0.95, 0.3);
    TabularTrainer a(p, c), b(p, c), resumed(p, c);
    train(a, 6000);
    train(b, 3000);
    resumed.load(b.save());
    train(b, 3000);
    train(resumed, 3000);
    const Snapshot sa = a.save(), sb = b.save(), sr = resumed.save();
    EXPECT_EQ(sa.state, sb.state);
    EXPECT_EQ(sa.state, sr.state);
    ASSERT_EQ(sa.tensors.size(), sr.tensors.size());
    for (size_t i = 0; i < sa.tensors.size(); ++i) {
      EXPECT_EQ(sa.tensors[i], sb.tensors[i]) << sa.tensors[i].first;
      EXPECT_EQ(sa.tensors[i], sr.tensors[i]) << sa.tensors[i].first;
    }
    EXPECT_EQ(a.evaluate(), resumed.evaluate());
    // Another seed explores differently.
    TabularConfig other = c;
    other.seed = 1;
    TabularTrainer d(p, other);
    train(d, 6000);
    EXPECT_NE(d.save().state, sa.state);
  }
}

}  // namespace
}  // namespace temper::tabular
