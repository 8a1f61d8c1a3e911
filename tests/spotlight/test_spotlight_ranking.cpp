// Why stale exploration is safe (spec methods-other section 3, signature ii): on a 2-D flow trained by flow
// matching and then by GRPO, the rewards of candidate seeds under theta_{k-1} rank them as theta_k does
// (Spearman > 0.8), and the G seeds of maximal spread chosen under theta_{k-1} still spread more than random
// seeds when theta_k regenerates them. Also: the per-row seeded sampler is flow::sample_sde when the rows'
// streams are sample_sde's own.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <numeric>

#include "spotlight/spotlight_fixture.h"
#include "temper/spotlight/flow_scorer.h"
#include "temper/spotlight/seeded_sampler.h"

namespace temper::spotlight {
namespace {

std::vector<double> ranks(const std::vector<double>& v) {
  std::vector<size_t> o(v.size());
  std::iota(o.begin(), o.end(), size_t{0});
  std::sort(o.begin(), o.end(), [&](size_t a, size_t b) { return v[a] < v[b]; });
  std::vector<double> r(v.size());
  for (size_t i = 0; i < o.size(); ++i) r[o[i]] = static_cast<double>(i);
  return r;
}

double spearman(const std::vector<double>& a, const std::vector<double>& b) {
  const std::vector<double> ra = ranks(a), rb = ranks(b);
  const double n = static_cast<double>(a.size()), m = (n - 1) / 2;
  double sab = 0, saa = 0, sbb = 0;
  for (size_t i = 0; i < a.size(); ++i)
    sab += (ra[i] - m) * (rb[i] - m), saa += (ra[i] - m) * (ra[i] - m), sbb += (rb[i] - m) * (rb[i] - m);
  return sab / std::sqrt(saa * sbb);
}

TEST(SpotlightSampler, PerRowStreamsAreSampleSde) {
  test::Setting s;
  flow::SdeConfig c;
  c.steps = 6;
  const int64_t B = 5;
  const std::vector<int32_t> y{0, 1, 2, 3, 1};
  const flow::SdeTrajectory a = flow::sample_sde(*s.parts.model, y.data(), B, c, 77);
  std::vector<uint64_t> key(B, 77), stream(B);
  std::iota(stream.begin(), stream.end(), uint64_t{0});
  const flow::SdeTrajectory b = flow::sample_sde_rows(*s.parts.model, y.data(), key.data(), stream.data(), B, c);
  EXPECT_EQ(a.x, b.x);
  EXPECT_EQ(a.logp, b.logp);
  // A seed's sample does not depend on the rows beside it.
  const std::vector<float> one = sample_seeds(*s.parts.model, 3, 2, {41}, c, false);
  const std::vector<float> many = sample_seeds(*s.parts.model, 3, 2, {40, 41, 42}, c, false);
  EXPECT_EQ(one[0], many[2]);
  EXPECT_EQ(one[1], many[3]);
}

TEST(SpotlightRanking, StaleRanksMatchAndSelectedGroupsSpreadMore) {
  test::Setting s(200);
  s.sc.explorers = 0, s.sc.max_staleness = 2;
  std::unique_ptr<SpotlightTrainer> tr = s.trainer();
  for (int64_t k = 1; k <= 6; ++k) tr->step(k);
  const WeightStore& st = tr->store();
  ASSERT_EQ(st.current(), 6);
  ASSERT_EQ(st.oldest(), 4);
  FlowScorer scorer(app::make_model(s.setup, *s.parts.data), s.reward(), 3, s.rl.sde, false);
  const int64_t N = 64, G = 8;
  double rho1 = 0, rho2 = 0, sel = 0, rnd = 0, sel_stale = 0, rnd_stale = 0, changed = 0;
  for (int32_t label = 0; label < 4; ++label) {
    std::vector<uint64_t> seeds(N);
    std::iota(seeds.begin(), seeds.end(), seed_id(100, label, 0));
    std::vector<std::vector<double>> r;
    for (int64_t v = 4; v <= 6; ++v) {
      scorer.set_params(st.get(v));
      r.push_back(scorer.score(label, seeds));
    }
    rho1 += spearman(r[1], r[2]) / 4, rho2 += spearman(r[0], r[2]) / 4;
    for (int64_t i = 0; i < N; ++i) changed = std::max(changed, std::abs(r[2][i] - r[1][i]));
    // Groups of G out of 32 candidates: chosen under theta_{k-1}, regenerated under theta_k.
    for (int64_t c = 0; c < N; c += 32) {
      const std::vector<double> cand(r[1].begin() + c, r[1].begin() + c + 32);
      std::vector<double> kept, kept_stale, first(r[2].begin() + c, r[2].begin() + c + G);
      for (size_t i : select_spread(cand, G))
        kept.push_back(r[2][static_cast<size_t>(c) + i]), kept_stale.push_back(cand[i]);
      sel += population_std(kept) / 8, rnd += population_std(first) / 8;
      sel_stale += population_std(kept_stale) / 8;
      rnd_stale += population_std(std::vector<double>(cand.begin(), cand.begin() + G)) / 8;
    }
  }
  std::printf(
      "spearman theta_{k-1} vs theta_k %.4f, theta_{k-2} vs theta_k %.4f; max reward change %.4f; "
      "group std under theta_{k-1}: selected %.4f, random %.4f; regenerated under theta_k: selected %.4f, "
      "random %.4f\n",
      rho1, rho2, changed, sel_stale, rnd_stale, sel, rnd);
  EXPECT_GT(changed, 1e-3);  // the versions differ
  EXPECT_GT(rho1, 0.8);
  EXPECT_GT(rho2, 0.8);
  EXPECT_GT(sel_stale, 1.5 * rnd_stale);
  EXPECT_GT(sel, 1.3 * rnd);  // the spread survives the version change
}

}  // namespace
}  // namespace temper::spotlight
