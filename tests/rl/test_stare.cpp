// STARE: the entropy-critical sets are the top P by surprisal within each advantage sign (ties: lower
// index), weights W on L+ (and M on L- for C2), nothing else touched; the gate, adaptive and band
// controllers on hand-made entropy sequences; the controller's state survives save/load; W = M = 1
// reproduces GRPO bitwise through the trainer while W > 1 changes the update; and on one softmax the
// first-order entropy change of a policy-gradient step rises with W (the mechanism the method rests on).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "rl/letter_task.h"
#include "temper/core/rng.h"
#include "temper/rl/methods/stare.h"

using namespace temper;
using namespace temper::rl;
using namespace temper::test;

namespace {

struct Tokens {
  std::vector<float> mask, adv, logp;
};

Tokens random_tokens(int64_t n, uint64_t seed) {
  Rng rng(seed, 0);
  Tokens t;
  for (int64_t i = 0; i < n; ++i) {
    uint32_t u = rng.next_u32();
    t.mask.push_back(u % 7 == 0 ? 0.f : 1.f);
    t.adv.push_back(static_cast<float>(static_cast<int>((u >> 3) % 3) - 1) * 0.7f);  // -0.7, 0, 0.7
    t.logp.push_back(-static_cast<float>((rng.next_u32() % 1000)) / 200.f);       // surprisal 0..5
  }
  return t;
}

}  // namespace

TEST(Stare, SelectsTheTopShareBySurprisalWithinEachSign) {
  const int64_t N = 257;
  Tokens t = random_tokens(N, 3);
  t.logp[10] = t.logp[11] = -9.f;  // a tie at the top: both are far above the rest
  t.adv[10] = t.adv[11] = 1.f;
  t.mask[10] = t.mask[11] = 1.f;
  for (StareVariant var : {StareVariant::o1, StareVariant::c2}) {
    StareConfig c;
    c.variant = var;
    c.top_ratio = 0.1;
    std::vector<float> w(N);
    StareWeights sw{true, 1.25, 0.8};
    StareSelection s = stare_token_weights(c, sw, t.mask.data(), t.adv.data(), t.logp.data(), N, w.data());
    int64_t pos = 0, neg = 0;
    for (int64_t i = 0; i < N; ++i) pos += t.mask[i] > 0 && t.adv[i] > 0, neg += t.mask[i] > 0 && t.adv[i] < 0;
    EXPECT_EQ(s.positive, pos);
    EXPECT_EQ(s.negative, neg);
    EXPECT_EQ(s.selected_positive, static_cast<int64_t>(std::ceil(0.1 * pos)));
    EXPECT_EQ(s.selected_negative, var == StareVariant::c2 ? static_cast<int64_t>(std::ceil(0.1 * neg)) : 0);
    float min_sel_pos = 1e9f, max_unsel_pos = -1e9f, min_sel_neg = 1e9f, max_unsel_neg = -1e9f;
    int64_t n_w = 0, n_m = 0;
    for (int64_t i = 0; i < N; ++i) {
      float s_i = -t.logp[i];
      if (t.mask[i] <= 0 || t.adv[i] == 0) {
        EXPECT_EQ(w[i], 1.f) << "token " << i << " is out of both sets";
        continue;
      }
      if (t.adv[i] > 0) {
        if (w[i] == 1.25f) ++n_w, min_sel_pos = std::min(min_sel_pos, s_i);
        else EXPECT_EQ(w[i], 1.f), max_unsel_pos = std::max(max_unsel_pos, s_i);
      } else {
        if (w[i] == 0.8f) ++n_m, min_sel_neg = std::min(min_sel_neg, s_i);
        else EXPECT_EQ(w[i], 1.f), max_unsel_neg = std::max(max_unsel_neg, s_i);
      }
    }
    EXPECT_EQ(n_w, s.selected_positive);
    EXPECT_EQ(n_m, s.selected_negative);
    EXPECT_GE(min_sel_pos, max_unsel_pos);
    if (var == StareVariant::c2) {
      EXPECT_GE(min_sel_neg, max_unsel_neg);
    }
    EXPECT_EQ(w[10], 1.25f);
    EXPECT_EQ(w[11], 1.25f);
  }
  // Ties at the k-th surprisal: the lower index wins.
  std::vector<float> mask(5, 1.f), adv(5, 1.f), logp(5, -1.f), w(5);
  StareConfig c;
  c.top_ratio = 0.4;  // k = 2 of 5
  stare_token_weights(c, {true, 2.0, 1.0}, mask.data(), adv.data(), logp.data(), 5, w.data());
  EXPECT_EQ(w, (std::vector<float>{2.f, 2.f, 1.f, 1.f, 1.f}));
  // Not active, or P = 0: GRPO's weights.
  for (auto [active, ratio] : {std::pair{false, 0.1}, std::pair{true, 0.0}}) {
    c.top_ratio = ratio;
    stare_token_weights(c, {active, 2.0, 0.5}, mask.data(), adv.data(), logp.data(), 5, w.data());
    EXPECT_EQ(w, std::vector<float>(5, 1.f));
  }
}

TEST(Stare, GateAdaptiveAndBandControllers) {
  StareConfig g;
  g.target_entropy = 0.5;
  StareController gate(g);
  EXPECT_FALSE(gate.update(0.6).active);
  StareWeights on = gate.update(0.4);
  EXPECT_TRUE(on.active);
  EXPECT_EQ(on.w, 1.1);
  EXPECT_EQ(on.m, 1.0);  // O1: M unused
  EXPECT_EQ(gate.active_steps(), 1);

  StareConfig a = g;
  a.control = StareControl::adaptive;
  a.variant = StareVariant::c2;
  a.alpha = 0.1;
  a.w_max = 1.35;
  a.m_min = 0.75;
  StareController ad(a);
  std::vector<double> ws, ms;
  for (int i = 0; i < 5; ++i) {
    StareWeights s = ad.update(0.2);
    ws.push_back(s.w);
    ms.push_back(s.m);
  }
  EXPECT_NEAR(ws[0], 1.2, 1e-12);
  EXPECT_NEAR(ws[1], 1.3, 1e-12);
  EXPECT_NEAR(ws[2], 1.35, 1e-12);  // bounded
  EXPECT_NEAR(ms[0], 0.8, 1e-12);
  EXPECT_NEAR(ms[1], 0.75, 1e-12);
  StareWeights back = ad.update(0.9);  // entropy high again: W steps down, the gate opens
  EXPECT_NEAR(back.w, 1.25, 1e-12);
  EXPECT_FALSE(back.active);

  StareConfig b;
  b.control = StareControl::band;
  b.target_entropy = 1.0;
  b.band = 0.05;
  b.kp = 1.0;
  b.ki = 0.5;
  b.w_max = 2.0;
  StareController band(b);
  EXPECT_EQ(band.update(1.03).w, 1.0);  // inside the band: nothing
  EXPECT_FALSE(band.current().active);
  double prev = 1.0;
  for (int i = 0; i < 3; ++i) {  // below the band: W rises step after step (P + growing I)
    double w = band.update(0.8).w;
    EXPECT_GT(w, prev);
    prev = w;
  }
  EXPECT_NEAR(prev, 1.0 + 0.2 + 0.5 * 0.6, 1e-12);
  for (int i = 0; i < 20; ++i) EXPECT_LE(band.update(0.1).w, 2.0);  // bounded, integral clamped
  EXPECT_EQ(band.current().w, 2.0);
  EXPECT_NEAR(band.integral(), 2.0, 1e-12);  // (w_max - 1) / ki
  double held = band.update(1.0).w;  // back inside: the integral holds W
  EXPECT_EQ(held, 2.0);
  double w1 = band.update(1.5).w;  // above: W falls back toward 1
  EXPECT_LT(w1, held);
  for (int i = 0; i < 10; ++i) band.update(1.5);
  EXPECT_EQ(band.current().w, 1.0);
  EXPECT_EQ(band.integral(), 0.0);

  // With smoothing the controller reads an EMA: one noisy low step inside a steady in-band run does
  // not move W, where the unsmoothed controller reacts at once.
  b.smooth = 0.8;
  StareController smooth(b), raw([&] { StareConfig c = b; c.smooth = 0; return c; }());
  for (int i = 0; i < 5; ++i) smooth.update(1.0), raw.update(1.0);
  EXPECT_EQ(smooth.update(0.8).w, 1.0);  // EMA 0.96: inside the 5% band
  EXPECT_NEAR(smooth.smoothed(), 0.96, 1e-12);
  EXPECT_GT(raw.update(0.8).w, 1.0);
  for (int i = 0; i < 10; ++i) smooth.update(0.8);  // a sustained drop still moves it
  EXPECT_GT(smooth.current().w, 1.0);
}

TEST(Stare, ControllerStateSurvivesSaveAndLoad) {
  for (StareControl ctl : {StareControl::gate, StareControl::adaptive, StareControl::band}) {
    StareConfig c;
    c.control = ctl;
    c.variant = StareVariant::c2;
    c.target_entropy = 0.7;
    StareController a(c);
    for (double h : {0.9, 0.5, 0.45, 0.6}) a.update(h);
    StareController b(c);
    b.load(a.save());
    EXPECT_EQ(a.save(), b.save());
    for (double h : {0.3, 0.8, 0.1}) {
      StareWeights x = a.update(h), y = b.update(h);
      EXPECT_EQ(x.active, y.active);
      EXPECT_EQ(x.w, y.w);
      EXPECT_EQ(x.m, y.m);
    }
  }
  StareController c{StareConfig{}};
  EXPECT_THROW(c.load("w=1\n"), Error);
}

TEST(Stare, UnitWeightsReproduceGrpoBitwiseAndOtherWeightsDoNot) {
  auto run = [](Method* m) {
    RlSetup s;
    std::vector<Method*> ms;
    if (m) ms.push_back(m);
    RlTrainer t(s.model, s.task, codec(), config(), s.safe, ms);
    for (int i = 0; i < 3; ++i) t.step();
    return std::vector<float>(s.model.params(), s.model.params() + s.model.flat_size());
  };
  std::vector<float> grpo = run(nullptr);
  StareConfig c;
  c.variant = StareVariant::c2;
  c.w = 1.0;
  c.m = 1.0;
  c.target_entropy = 1e9;  // always on
  Stare unit(c);
  std::vector<float> same = run(&unit);
  EXPECT_EQ(unit.controller().active_steps(), 3);
  EXPECT_EQ(0, std::memcmp(grpo.data(), same.data(), grpo.size() * sizeof(float)));
  c.w = 3.0;
  c.m = 0.3;
  c.top_ratio = 0.5;
  Stare strong(c);
  std::vector<float> other = run(&strong);
  EXPECT_NE(0, std::memcmp(grpo.data(), other.data(), grpo.size() * sizeof(float)));
}

TEST(Stare, RaisingWOnHighSurprisalPositiveTokensRaisesTheFirstOrderEntropyChange) {
  // One softmax over V outcomes; a batch of sampled outcomes with +-1 advantages. A policy-gradient
  // step on the weighted surrogate moves the logits by dz = sum_i w_i A_i (e_{o_i} - pi), and the
  // entropy by dH = sum_k dH/dz_k dz_k with dH/dz_k = -pi_k (log pi_k + H).
  const int V = 8;
  std::vector<double> z = {2.0, 1.2, 0.7, 0.3, -0.2, -0.8, -1.5, -2.4}, pi(V);
  double zmax = z[0], sum = 0;
  for (int k = 0; k < V; ++k) sum += std::exp(z[k] - zmax);
  double H = 0;
  for (int k = 0; k < V; ++k) pi[k] = std::exp(z[k] - zmax) / sum, H -= pi[k] * std::log(pi[k]);
  Rng rng(11, 0);
  const int64_t N = 400;
  std::vector<float> mask(N, 1.f), adv(N), logp(N);
  std::vector<int> tok(N);
  for (int64_t i = 0; i < N; ++i) {
    double u = rng.next_u32() / 4294967296.0, c = 0;
    int k = 0;
    for (; k < V - 1; ++k) {
      c += pi[k];
      if (u < c) break;
    }
    tok[i] = k;
    logp[i] = static_cast<float>(std::log(pi[k]));
    adv[i] = rng.next_u32() % 2 ? 1.f : -1.f;
  }
  auto dH = [&](double W) {
    StareConfig c;
    std::vector<float> w(N);
    stare_token_weights(c, {true, W, 1.0}, mask.data(), adv.data(), logp.data(), N, w.data());
    std::vector<double> dz(V, 0.0);
    for (int64_t i = 0; i < N; ++i)
      for (int k = 0; k < V; ++k) dz[k] += w[i] * adv[i] * ((k == tok[i] ? 1.0 : 0.0) - pi[k]);
    double d = 0;
    for (int k = 0; k < V; ++k) d += -pi[k] * (std::log(pi[k]) + H) * dz[k];
    return d;
  };
  double base = dH(1.0), up = dH(1.5), more = dH(2.0);
  std::printf("first-order entropy change: W=1 %.4f, W=1.5 %.4f, W=2 %.4f\n", base, up, more);
  EXPECT_GT(up, base);
  EXPECT_GT(more, up);
}
