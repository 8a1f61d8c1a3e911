// Speculative decoding in the rollout engine (EfficientRollout): samples are distributed exactly as
// plain sampling (two-sample chi-square on the first tokens, with a drafter close to the policy
// and with one far from it, at T = 1 and T = 0.6 with top-p), greedy output equals plain greedy
// output token for token (with stop ids, forced tokens and forks), the 4-bit drafter of the policy
// accepts most drafts and a stale one fewer, and the toggle and the ladder follow their rules.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "common/models.h"
#include "temper/model/int4_drafter.h"
#include "temper/rollout/engine.h"
#include "temper/rollout/sampler.h"
#include "temper/rollout/spec_control.h"
#include "temper/rollout/spec_sampling.h"

using namespace temper;
using namespace temper::rollout;

namespace {

using Fixture = test::RandomModel;

SpecConfig fixed_gamma(int64_t g, SpecToggle t = SpecToggle::always) {
  SpecConfig c;
  c.ladder = {g};
  c.toggle = t;
  return c;
}

RolloutRequest request(std::vector<int32_t> prompt, int64_t g, int64_t max_new, uint64_t seed, float temp, float top_p) {
  RolloutRequest r;
  r.prompt = std::move(prompt);
  r.group_size = g;
  r.max_new = max_new;
  r.seed = seed;
  r.sampler.temperature = temp;
  r.sampler.top_p = top_p;
  return r;
}

// Two-sample chi-square statistic over the categories of a and b (categories with fewer than 10
// samples in both pooled are merged into one); returns {statistic, degrees of freedom}.
std::pair<double, int> chi2_two_sample(const std::map<int64_t, int64_t>& a, const std::map<int64_t, int64_t>& b) {
  std::map<int64_t, std::pair<double, double>> cells;
  for (auto [k, v] : a) cells[k].first += v;
  for (auto [k, v] : b) cells[k].second += v;
  std::vector<std::pair<double, double>> merged;
  std::pair<double, double> rest{0, 0};
  for (auto& [k, c] : cells) {
    if (c.first + c.second < 10) {
      rest.first += c.first;
      rest.second += c.second;
    } else {
      merged.push_back(c);
    }
  }
  if (rest.first + rest.second > 0) merged.push_back(rest);
  double na = 0, nb = 0;
  for (auto& c : merged) na += c.first, nb += c.second;
  double chi = 0;
  for (auto& c : merged) {
    double tot = c.first + c.second, ea = tot * na / (na + nb), eb = tot * nb / (na + nb);
    chi += (c.first - ea) * (c.first - ea) / ea + (c.second - eb) * (c.second - eb) / eb;
  }
  return {chi, static_cast<int>(merged.size()) - 1};
}

// The chi-square quantile at 1 - 1e-3 (Wilson-Hilferty): statistics above it reject at p < 0.001.
double chi2_critical(int df) {
  const double z = 3.0902, k = df;
  double t = 1 - 2 / (9 * k) + z * std::sqrt(2 / (9 * k));
  return k * t * t * t;
}

// Per-position token counts of positions [from, to) of every completion.
std::vector<std::map<int64_t, int64_t>> marginals(const std::vector<Completion>& out, size_t from, size_t to) {
  std::vector<std::map<int64_t, int64_t>> m(to - from);
  for (const Completion& c : out)
    for (size_t p = from; p < to && p < c.tokens.size(); ++p) ++m[p - from][c.tokens[p]];
  return m;
}

struct Draws {
  std::vector<Completion> out;
  EngineStats stats;
};

Draws sample(Transformer& model, const Int4Drafter* drafter, SpecController* spec, float temp, float top_p, uint64_t seed,
             int64_t n) {
  KvPool pool(model.config(), 8, n * 3 + 16);
  EngineConfig ec(n);
  ec.drafter = drafter;
  ec.spec = spec;
  RolloutEngine eng(model, pool, ec);
  Draws d;
  d.out = eng.run({request({3, 1, 4, 1, 5}, n, 6, seed, temp, top_p)});
  d.stats = eng.stats();
  return d;
}

}  // namespace

TEST(Speculative, SamplerDistributionIsWhatItSamples) {
  std::vector<float> z(50);
  Rng init(3, 0);
  for (auto& v : z) v = 2.f * init.normal();
  for (int mode = 0; mode < 4; ++mode) {
    SamplerConfig c;
    c.temperature = mode == 0 ? 1.f : 0.6f;
    c.top_p = mode == 2 ? 0.8f : 1.f;
    c.top_k = mode == 3 ? 7 : 0;
    c.min_p = mode == 3 ? 0.02f : 0.f;
    c.repetition_penalty = mode == 1 ? 1.3f : 1.f;
    std::vector<int32_t> prompt = {1, 2, 3}, done = {4, 4};
    History h{prompt, done};
    Sampler s(c);
    std::vector<float> p(50);
    s.distribution(z.data(), 50, h, p.data());
    double sum = 0;
    for (float v : p) sum += v;
    EXPECT_NEAR(sum, 1.0, 1e-5);
    Rng rng(9, mode);
    std::vector<double> freq(50, 0);
    const int n = 20000;
    for (int i = 0; i < n; ++i) {
      Sample x = s.sample(z.data(), 50, rng, h);
      ASSERT_GT(p[x.token], 0.f) << "mode " << mode;
      ASSERT_NEAR(x.logprob, std::log(p[x.token]), 1e-5) << "mode " << mode;
      freq[x.token] += 1.0 / n;
    }
    for (int v = 0; v < 50; ++v) EXPECT_NEAR(freq[v], p[v], 4 * std::sqrt(p[v] * (1 - p[v]) / n) + 1e-9) << "mode " << mode << " v " << v;
  }
}

TEST(Speculative, SamplesAreDistributedAsPlainSampling) {
  Fixture f;
  Fixture far;  // a drafter far from the policy: most drafts rejected, the residual draws matter
  far.model.init_random(99, 0.3f);
  Int4Drafter near_d, far_d;
  near_d.refresh(f.model);
  far_d.refresh(far.model);
  const int64_t n = 6000;
  struct Case { const Int4Drafter* d; float temp, top_p; const char* name; };
  for (Case k : {Case{&near_d, 1.f, 1.f, "near T=1"}, Case{&far_d, 1.f, 1.f, "far T=1"},
                 Case{&near_d, 0.6f, 0.9f, "near T=0.6 top-p 0.9"}, Case{&far_d, 0.6f, 0.9f, "far T=0.6 top-p 0.9"}}) {
    SCOPED_TRACE(k.name);
    SpecController spec(fixed_gamma(4));
    Draws sd = sample(f.model, k.d, &spec, k.temp, k.top_p, 1, n);
    Draws ar = sample(f.model, nullptr, nullptr, k.temp, k.top_p, 2, n);
    ASSERT_EQ(sd.stats.spec_from_step, 1);  // from the first decode step on
    ASSERT_GT(sd.stats.drafted, n);
    const double ar_rate = double(sd.stats.accepted) / double(sd.stats.drafted);
    // This peaked random model (entropy ~0.6 nats) is a hard case for 4 bits: about half the
    // drafts of its own quantized copy are kept, few of the far model's.
    if (k.d == &far_d) EXPECT_LT(ar_rate, 0.25);
    else EXPECT_GT(ar_rate, 0.33);
    auto ms = marginals(sd.out, 1, 6), ma = marginals(ar.out, 1, 6);
    for (size_t p = 0; p < ms.size(); ++p) {
      auto [chi, df] = chi2_two_sample(ms[p], ma[p]);
      EXPECT_LT(chi, chi2_critical(df)) << "position " << p + 1 << " df " << df;
    }
    // The joint of positions 1 and 2 (pairs), where a drafted token and its successor meet.
    std::map<int64_t, int64_t> ja, jb;
    for (const Completion& c : sd.out) ++ja[c.tokens[1] * 1000 + c.tokens[2]];
    for (const Completion& c : ar.out) ++jb[c.tokens[1] * 1000 + c.tokens[2]];
    auto [chi, df] = chi2_two_sample(ja, jb);
    EXPECT_LT(chi, chi2_critical(df)) << "joint df " << df;
  }
}

TEST(Speculative, TheChiSquareCheckCatchesABiasedRule) {
  // Power check of the test above: sampling from the far drafter alone (what accepting every
  // draft would give) is rejected at every position.
  Fixture f;
  Fixture far;
  far.model.init_random(99, 0.3f);
  Draws q = sample(far.model, nullptr, nullptr, 1.f, 1.f, 1, 6000);
  Draws p = sample(f.model, nullptr, nullptr, 1.f, 1.f, 2, 6000);
  auto mq = marginals(q.out, 1, 6), mp = marginals(p.out, 1, 6);
  for (size_t i = 0; i < mq.size(); ++i) {
    auto [chi, df] = chi2_two_sample(mq[i], mp[i]);
    EXPECT_GT(chi, chi2_critical(df)) << "position " << i + 1;
  }
}

namespace {

// Forks two children at the 5th token of member 0 (each forced to start with token 7).
class ForkAtFive : public RolloutHook {
 public:
  HookDecision after_token(const RolloutRequest&, const Completion& c) override {
    HookDecision d;
    if (c.parent < 0 && c.member == 0 && c.tokens.size() == 5) {
      d.forks = 2;
      d.fork_forced = {7};
    }
    return d;
  }
};

}  // namespace

TEST(Speculative, GreedyOutputEqualsPlainGreedy) {
  Fixture f;
  Int4Drafter drafter;
  drafter.refresh(f.model);
  std::vector<RolloutRequest> reqs;
  for (int r = 0; r < 4; ++r) {
    RolloutRequest q = request({int32_t(5 + r), 9, 2, int32_t(40 + r)}, 2, 30 + 5 * r, r, 1.f, 1.f);
    q.sampler.greedy = true;
    if (r == 1) q.stop_ids = {11, 12, 13};
    if (r == 2) q.forced = {3, 3};
    reqs.push_back(q);
  }
  auto run = [&](bool spec_on, EngineStats* st) {
    KvPool pool(f.cfg, 8, 128);
    SpecController spec(fixed_gamma(5));
    EngineConfig ec(16);
    if (spec_on) {
      ec.drafter = &drafter;
      ec.spec = &spec;
    }
    RolloutEngine eng(f.model, pool, ec);
    ForkAtFive hook;
    auto out = eng.run(reqs, &hook);
    *st = eng.stats();
    return out;
  };
  EngineStats s1, s0;
  auto sd = run(true, &s1), ar = run(false, &s0);
  ASSERT_EQ(sd.size(), ar.size());
  ASSERT_GT(s1.accepted, 0);
  EXPECT_LT(s1.steps, s0.steps);  // fewer engine steps: several tokens per cycle
  for (size_t i = 0; i < sd.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(sd[i].tokens, ar[i].tokens);
    EXPECT_EQ(sd[i].finish, ar[i].finish);
    EXPECT_EQ(sd[i].parent, ar[i].parent);
    EXPECT_EQ(sd[i].forced, ar[i].forced);
    ASSERT_EQ(sd[i].policy_logprob.size(), ar[i].policy_logprob.size());
    for (size_t t = 0; t < sd[i].policy_logprob.size(); ++t) {
      EXPECT_NEAR(sd[i].policy_logprob[t], ar[i].policy_logprob[t], 1e-4);
      EXPECT_NEAR(sd[i].entropy[t], ar[i].entropy[t], 1e-4);
    }
  }
}

TEST(Speculative, ALazyDrafterIsRefreshedOnlyWhenSpeculationTurnsOnAndChangesNothing) {
  // The trainer re-quantizes lazily (on_spec_start): a run that turns speculation on refreshes once,
  // just before the first draft, and gives the tokens of a drafter refreshed up front; a run that
  // never turns it on (threshold 1: the six equal-length sequences end together) never refreshes.
  Fixture f;
  std::vector<RolloutRequest> reqs;
  for (int r = 0; r < 3; ++r) reqs.push_back(request({int32_t(3 + r), 7, 2}, 2, 20, r, 1.f, 1.f));
  auto run = [&](Int4Drafter& d, int64_t threshold, bool lazy, int* refreshes, EngineStats* st) {
    KvPool pool(f.cfg, 8, 128);
    SpecConfig c = fixed_gamma(4, SpecToggle::threshold);
    c.threshold = threshold;
    SpecController spec(c);
    RolloutEngine eng(f.model, pool, EngineConfig(16));
    eng.set_speculative(&d, &spec, lazy ? std::function<void()>([&] {
      ++*refreshes;
      d.refresh(f.model);
    }) : std::function<void()>());
    auto out = eng.run(reqs);
    *st = eng.stats();
    return out;
  };
  Int4Drafter eager, lazy, never;
  eager.refresh(f.model);
  int n_eager = 0, n_lazy = 0, n_never = 0;
  EngineStats se, sl, sn;
  auto a = run(eager, 8, false, &n_eager, &se);
  auto b = run(lazy, 8, true, &n_lazy, &sl);
  EXPECT_EQ(n_lazy, 1);
  ASSERT_GT(sl.spec_cycles, 0);
  EXPECT_EQ(sl.accepted, se.accepted);
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i].tokens, b[i].tokens) << i;
  auto c = run(never, 1, true, &n_never, &sn);  // six sequences of one length: never 1 live
  EXPECT_EQ(n_never, 0);
  EXPECT_FALSE(never.ready());
  EXPECT_EQ(sn.spec_cycles, 0);
}

TEST(Speculative, AStaleDrafterAcceptsFewerDrafts) {
  Fixture f;
  f.model.init_random(17, 0.1f);  // a smoother model: its 4-bit copy is close (TV ~0.07 per token)
  Int4Drafter fresh(128, 0), stale(128, 3);
  // Four "updates": the policy moves a little each time; the lag-3 drafter keeps the first copy.
  std::vector<float> step(static_cast<size_t>(f.model.flat_size()));
  for (int u = 0; u < 4; ++u) {
    if (u > 0) {
      rng_fill_normal(100 + u, 0, std::span<float>(step), 0.f, 0.03f);
      for (int64_t i = 0; i < f.model.flat_size(); ++i) f.model.params()[i] += step[static_cast<size_t>(i)];
      f.model.params_updated();
    }
    fresh.refresh(f.model);
    stale.refresh(f.model);
  }
  auto rate = [&](const Int4Drafter& d) {
    SpecController spec(fixed_gamma(4));
    Draws s = sample(f.model, &d, &spec, 1.f, 1.f, 5, 400);
    EXPECT_GT(1.0 + double(s.stats.accepted) / double(s.stats.spec_cycles), 1.0);  // mean accepted length
    return double(s.stats.accepted) / double(s.stats.drafted);
  };
  const double r_fresh = rate(fresh), r_stale = rate(stale);
  EXPECT_GT(r_fresh, 0.8);
  EXPECT_LT(r_stale, r_fresh - 0.1) << "fresh " << r_fresh << " stale " << r_stale;
}

TEST(Speculative, ToggleTurnsOnOnlyBelowBreakEvenAndAfterTheRamp) {
  // Synthetic cost model: a policy forward costs 10 ms up to 16 rows, then 1 ms per 1.6 rows; the
  // drafter a quarter. With L = 3 and gamma = 5: speed-up 3 * 10 / (5 * 2.5 + T(6B)).
  SpecCostModel m;
  m.rows = {1, 16, 1024};
  m.policy_s = {0.010, 0.010, 0.640};
  m.draft_s = {0.0025, 0.0025, 0.160};
  SpecConfig c = fixed_gamma(5, SpecToggle::cost);
  SpecController spec(c);
  spec.set_cost_model(m);
  spec.end_rollout(10, 50, 20, false);  // L = 1 + 20 / 10 = 3
  EXPECT_DOUBLE_EQ(spec.expected_len(), 3.0);
  EXPECT_NEAR(spec.predicted_speedup(1), 3 * 0.010 / (5 * 0.0025 + m.policy(6)), 1e-12);
  EXPECT_TRUE(spec.turn_on(1));
  EXPECT_TRUE(spec.turn_on(2));
  EXPECT_FALSE(spec.turn_on(8));   // 48 rows of verify cost more than three decode steps save
  EXPECT_FALSE(spec.turn_on(64));
  int64_t breakeven = 0;
  for (int64_t b = 1; b <= 64; ++b)
    if (spec.turn_on(b)) breakeven = b;
  for (int64_t b = 1; b <= 64; ++b) EXPECT_EQ(spec.turn_on(b), b <= breakeven);  // monotone in the batch
  // The sampler's host work per row (a plain step draws B rows; a cycle makes B (2 gamma + 1) dense distributions)
  // lowers the prediction and the break-even: 0.2 ms a row against the 10 ms forward takes it from 4 to 2 sequences.
  SpecCostModel mh = m;
  mh.sample_s = 0.0002;
  mh.dist_s = 0.0002;
  SpecController with_host(c);
  with_host.set_cost_model(mh);
  with_host.end_rollout(10, 50, 20, false);
  EXPECT_NEAR(with_host.predicted_speedup(2),
              3 * (0.010 + 2 * 0.0002) / (5 * (0.0025 + 2 * 0.0002) + m.policy(12) + 12 * 0.0002), 1e-12);
  int64_t breakeven_host = 0;
  for (int64_t b = 1; b <= 64; ++b)
    if (with_host.turn_on(b)) breakeven_host = b;
  EXPECT_EQ(breakeven, 4);
  EXPECT_EQ(breakeven_host, 2);
  SpecController thr(fixed_gamma(5, SpecToggle::threshold));
  EXPECT_TRUE(thr.turn_on(8));
  EXPECT_FALSE(thr.turn_on(9));

  // In the engine (threshold 4): 12 sequences of different lengths through 6 seats. The queue
  // holds requests for a while with <= 4 live: no speculation before every request is admitted,
  // then it turns on once live <= 4 and stays on (one switch per rollout).
  Fixture f;
  Int4Drafter d;
  d.refresh(f.model);
  SpecConfig tc = fixed_gamma(3, SpecToggle::threshold);
  tc.threshold = 4;
  SpecController ts(tc);
  std::vector<RolloutRequest> reqs;
  for (int r = 0; r < 6; ++r) reqs.push_back(request({int32_t(1 + r), 2, 3}, 2, 4 + 6 * r, r, 1.f, 1.f));
  KvPool pool(f.cfg, 8, 256);
  EngineConfig ec(6);
  ec.drafter = &d;
  ec.spec = &ts;
  RolloutEngine eng(f.model, pool, ec);
  struct Watch : RolloutHook {  // the step the last request's first token came in
    int64_t step = 0, last_admitted = -1;
    HookDecision after_token(const RolloutRequest& q, const Completion&) override {
      if (q.prompt[0] == 6 && last_admitted < 0) last_admitted = step;
      return {};
    }
    void after_step(int64_t s) override { step = s + 1; }
  } watch;
  auto out = eng.run(reqs, &watch);
  const EngineStats& st = eng.stats();

  ASSERT_GT(st.spec_from_step, 0);
  EXPECT_GT(st.spec_cycles, 0);
  // Every token is accounted for, and nothing speculated while requests were still waiting: the
  // last request is admitted only after three others finished (6 seats, 2 per request).
  int64_t total = 0;
  for (const auto& c : out) total += static_cast<int64_t>(c.tokens.size());
  EXPECT_EQ(total, st.decode_tokens + 12);  // + each sequence's first token (from its request's prefill)
  ASSERT_GT(watch.last_admitted, 0);
  EXPECT_GT(st.spec_from_step, watch.last_admitted);
  for (const auto& c : out) EXPECT_EQ(c.finish, FinishReason::length);
}

TEST(Speculative, LadderMovesAfterTwoConsecutiveRollouts) {
  SpecController s(SpecConfig{});
  EXPECT_EQ(s.gamma(), 5);
  EXPECT_DOUBLE_EQ(s.expected_len(), 5.0);  // cold start: L = gamma
  auto roll = [&](double ar) { s.end_rollout(100, 500, static_cast<int64_t>(std::lround(ar * 500)), true); };
  roll(0.95);
  EXPECT_EQ(s.gamma(), 5);
  roll(0.90);  // neither: both counts reset
  roll(0.95);
  EXPECT_EQ(s.gamma(), 5);
  roll(0.96);
  EXPECT_EQ(s.gamma(), 7);
  roll(0.94);
  roll(0.94);
  EXPECT_EQ(s.gamma(), 9);
  roll(0.99);
  roll(0.99);
  EXPECT_EQ(s.gamma(), 11);
  roll(0.99);
  roll(0.99);
  EXPECT_EQ(s.gamma(), 11);  // top rung
  roll(0.85);
  EXPECT_EQ(s.gamma(), 11);
  roll(0.95);  // an up resets the down count
  roll(0.80);
  EXPECT_EQ(s.gamma(), 11);
  roll(0.80);
  EXPECT_EQ(s.gamma(), 9);
  s.end_rollout(0, 0, 0, true);  // a rollout without speculation changes nothing
  EXPECT_EQ(s.state().down, 0);
  EXPECT_NEAR(s.expected_len(), 1 + 400.0 / 100, 1e-12);
  SpecState saved = s.state();
  SpecController t(SpecConfig{});
  t.set_state(saved);
  EXPECT_EQ(t.gamma(), 9);
  saved.rung = 4;
  EXPECT_THROW(t.set_state(saved), Error);
}

TEST(Speculative, RejectionPrimitives) {
  // p = (0.5, 0.3, 0.2), q = (0.2, 0.6, 0.2): accept token 1 with prob 0.5; residual = (0.3, 0, 0) / 0.3.
  const float p[3] = {0.5f, 0.3f, 0.2f}, q[3] = {0.2f, 0.6f, 0.2f};
  Rng rng(1, 1);
  int acc = 0;
  for (int i = 0; i < 20000; ++i) acc += spec_accept(p[1], q[1], rng);
  EXPECT_NEAR(acc / 20000.0, 0.5, 0.015);
  for (int i = 0; i < 100; ++i) EXPECT_TRUE(spec_accept(p[0], q[0], rng));
  for (int i = 0; i < 100; ++i) EXPECT_EQ(spec_residual(p, q, 3, rng), 0);
  const float same[3] = {0.5f, 0.3f, 0.2f};
  int counts[3] = {0, 0, 0};
  for (int i = 0; i < 20000; ++i) ++counts[spec_residual(p, same, 3, rng)];  // no residual mass: draws p
  EXPECT_NEAR(counts[0] / 20000.0, 0.5, 0.015);
  EXPECT_NEAR(counts[2] / 20000.0, 0.2, 0.015);
}

// The drafter head over a vocabulary subset (FR-Spec): the tokens counted most often, ties and
// unseen tokens by lower id; the subset's logits are the whole head's, the others -inf; samples
// stay distributed as the policy's (the residual draws the tokens the drafter cannot propose).
TEST(Speculative, DraftVocabularyRanksByCountThenById) {
  std::vector<uint64_t> counts(12, 0);
  counts[5] = 3;
  counts[2] = 3;
  counts[9] = 1;
  EXPECT_EQ(draft_vocabulary(counts, 12, 3), (std::vector<int32_t>{2, 5, 9}));
  EXPECT_EQ(draft_vocabulary(counts, 12, 4), (std::vector<int32_t>{0, 2, 5, 9}));
  EXPECT_EQ(draft_vocabulary(counts, 12, 2), (std::vector<int32_t>{2, 5}));
  EXPECT_EQ(draft_vocabulary({}, 12, 3), (std::vector<int32_t>{0, 1, 2}));  // nothing seen: the lowest ids
  EXPECT_EQ(draft_vocabulary({0, 0, 7}, 4, 9).size(), 4u);                  // k past the vocabulary: all of it
  EXPECT_THROW(draft_vocabulary(counts, 12, 0), Error);
}

TEST(Speculative, ASubsetHeadKeepsTheWholeHeadsLogitsOfItsTokensAndNoOthers) {
  Fixture f;
  const int64_t V = f.cfg.vocab_size, n = 5;
  for (DraftHead head : {DraftHead::bf16, DraftHead::int4}) {
    SCOPED_TRACE(head == DraftHead::bf16 ? "bf16 head" : "int4 head");
    Int4Drafter whole(128, 0, head), part(128, 0, head);
    part.set_vocab(40);
    part.observe({100, 100, 100, 7, 7, 64, 3});  // then the 36 lowest other ids: 0-37 but 3 and 7
    whole.refresh(f.model);
    part.refresh(f.model);
    ASSERT_TRUE(whole.vocab_ids().empty());
    const std::vector<int32_t>& ids = part.vocab_ids();
    ASSERT_EQ(ids.size(), 40u);
    for (int32_t t : {100, 7, 64, 3, 0, 37}) EXPECT_TRUE(std::count(ids.begin(), ids.end(), t)) << t;
    for (int32_t t : {38, 41, 99}) EXPECT_FALSE(std::count(ids.begin(), ids.end(), t)) << t;
    EXPECT_LT(part.bytes(), whole.bytes());
    EXPECT_DOUBLE_EQ(part.vocab_coverage({100, 7, 41, 120}), 0.5);
    EXPECT_DOUBLE_EQ(whole.vocab_coverage({100, 7, 41, 120}), 1.0);
    auto logits = [&](const Int4Drafter& d) {
      KvPool pool(f.cfg, 8, 4);
      SeqKv s;
      pool.reserve(s, n);
      std::vector<int32_t> tok = {3, 1, 4, 1, 5}, pos = {0, 1, 2, 3, 4};
      std::vector<const int32_t*> tables(n, s.blocks.data());
      std::vector<int64_t> rows = {0, 1, 2, 3, 4};
      std::vector<float> z(static_cast<size_t>(n * V), 0.f);
      PagedStep st;
      st.n = st.n_out = n;
      st.tokens = tok.data();
      st.pos = pos.data();
      st.tables = tables.data();
      st.out_rows = rows.data();
      st.logits = z.data();
      f.model.forward_paged(st, pool, &d);
      return z;
    };
    std::vector<float> zw = logits(whole), zp = logits(part);
    std::vector<uint8_t> in(static_cast<size_t>(V), 0);
    for (int32_t t : ids) in[static_cast<size_t>(t)] = 1;
    for (int64_t i = 0; i < n * V; ++i) {
      if (in[static_cast<size_t>(i % V)])
        ASSERT_NEAR(zp[i], zw[i], 1e-5f * (1 + std::fabs(zw[i]))) << i;
      else
        ASSERT_TRUE(std::isinf(zp[i]) && zp[i] < 0) << i;
    }
  }
  Int4Drafter f32_head(128, 0, DraftHead::f32);
  EXPECT_THROW(f32_head.set_vocab(40), Error);
  EXPECT_THROW(Int4Drafter().set_vocab(-1), Error);
}

TEST(Speculative, SamplesFromASubsetDrafterAreDistributedAsPlainSampling) {
  Fixture f;
  const int64_t n = 6000;
  // The subset from plain samples of this prompt: most of what the policy samples is inside it,
  // not all (the residual has to draw the rest).
  Draws seen = sample(f.model, nullptr, nullptr, 1.f, 1.f, 7, 200);
  Int4Drafter d;
  d.set_vocab(24);
  for (const Completion& c : seen.out) d.observe(c.tokens);
  d.refresh(f.model);
  SpecController spec(fixed_gamma(4));
  Draws sd = sample(f.model, &d, &spec, 1.f, 1.f, 1, n);
  Draws ar = sample(f.model, nullptr, nullptr, 1.f, 1.f, 2, n);
  std::vector<int32_t> emitted;
  for (const Completion& c : ar.out) emitted.insert(emitted.end(), c.tokens.begin() + 1, c.tokens.end());
  const double cov = d.vocab_coverage(emitted);
  EXPECT_GT(cov, 0.3);  // 0.54 here: nearly half of what the policy samples the drafter cannot propose
  EXPECT_LT(cov, 0.9);
  ASSERT_GT(sd.stats.accepted, n);
  auto ms = marginals(sd.out, 1, 6), ma = marginals(ar.out, 1, 6);
  for (size_t p = 0; p < ms.size(); ++p) {
    auto [chi, df] = chi2_two_sample(ms[p], ma[p]);
    EXPECT_LT(chi, chi2_critical(df)) << "position " << p + 1 << " df " << df;
  }
}
