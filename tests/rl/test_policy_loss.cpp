// Policy loss: (1) golden against TRL 0.19.1 GRPOTrainer (tools/ref/trl_grpo_golden.py): advantages,
// loss, per-token KL, d loss / d logp and clip fractions for every TRL loss_type, beta 0 and > 0,
// clip-higher, TRL's delta (= dual-clip), on-policy (no old log-probs); the batch is run as two
// micro-batches. (2) coefs() against central finite differences of policy_loss_forward for every
// aggregation x KL estimator x dual-clip x entropy x weights x old/on-policy. (3) the fused classifier
// driving PolicyLoss from many threads, against finite differences through the classifier forward.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "common/op_harness.h"
#include "common/test_data.h"
#include "common/tolerance.h"
#include "temper/core/error.h"
#include "temper/kernels/classifier.h"
#include "temper/rl/advantages.h"
#include "temper/rl/policy_loss.h"

using namespace temper;
using namespace temper::rl;
using temper::test::all_close;
using temper::test::Kind;
using temper::test::tolerance;

namespace {

nlohmann::json load_golden() {
  std::string path = test::test_data("golden/trl_grpo/grpo_loss.json");
  std::ifstream f(path);
  if (!f) throw std::runtime_error("cannot open " + path);
  return nlohmann::json::parse(f);
}

template <class T>
std::vector<T> vec(const nlohmann::json& j) {
  return j.get<std::vector<T>>();
}

LossAgg agg_of_trl(const std::string& loss_type) {
  if (loss_type == "grpo") return LossAgg::seq_mean_token_mean;
  if (loss_type == "bnpo") return LossAgg::token_mean;
  if (loss_type == "dr_grpo") return LossAgg::seq_mean_token_sum_norm;
  throw std::runtime_error("unknown TRL loss_type " + loss_type);
}

::testing::AssertionResult close(double got, double want, double tol, double atol = 0) {
  return all_close(&got, &want, 1, tol, atol);
}

}  // namespace

TEST(PolicyLossGolden, AdvantagesMatchTrl) {
  auto j = load_golden();
  auto r = vec<float>(j["rewards"]);
  auto g = vec<int64_t>(j["group"]);
  int64_t B = j["B"];
  std::vector<float> a(static_cast<size_t>(B));
  compute_advantages({AdvantageEstimator::grpo, RewardScale::group}, r.data(), g.data(), B, a.data());
  EXPECT_TRUE(all_close(a, vec<double>(j["advantages_scaled"]), tolerance(Kind::elementwise, 1, 2)));
  compute_advantages({AdvantageEstimator::dr_grpo, RewardScale::none}, r.data(), g.data(), B, a.data());
  EXPECT_TRUE(all_close(a, vec<double>(j["advantages_unscaled"]), tolerance(Kind::elementwise)));
}

TEST(PolicyLossGolden, KlK3MatchesTrl) {
  auto j = load_golden();
  auto lp = vec<float>(j["logp"]), ref = vec<float>(j["ref_logp"]);
  std::vector<double> kl(lp.size());
  for (size_t i = 0; i < lp.size(); ++i) kl[i] = policy_kl(KlEstimator::k3, lp[i], ref[i]);
  EXPECT_TRUE(all_close(kl, vec<double>(j["per_token_kl_k3"]), 1e-10));
}

TEST(PolicyLossGolden, LossGradAndStatsMatchTrlEveryLossType) {
  auto j = load_golden();
  const int64_t B = j["B"], T = j["T"], N = B * T;
  auto rewards = vec<float>(j["rewards"]);
  auto group = vec<int64_t>(j["group"]);
  auto mask_i = vec<int>(j["mask"]);
  auto lp = vec<float>(j["logp"]), old = vec<float>(j["old_logp"]), ref = vec<float>(j["ref_logp"]);
  std::vector<float> mask(mask_i.begin(), mask_i.end());
  int seen = 0;
  for (const auto& c : j["cases"]) {
    std::string lt = c["loss_type"];
    SCOPED_TRACE("loss_type " + lt + " beta " + std::to_string(c["beta"].get<double>()) + " delta " +
                 c["delta"].dump() + " eps_high " + std::to_string(c["epsilon_high"].get<double>()) +
                 (c["on_policy"].get<bool>() ? " on-policy" : ""));
    PolicyLossConfig cfg;
    cfg.eps_low = c["epsilon"];
    cfg.eps_high = c["epsilon_high"];
    cfg.dual_clip = c["delta"].is_null() ? 0.0 : c["delta"].get<double>();
    cfg.kl_coef = c["beta"];
    cfg.kl_estimator = KlEstimator::k3;
    cfg.agg = agg_of_trl(lt);
    cfg.max_len = j["max_completion_length"];

    AdvantageConfig acfg;  // TRL 0.19's scale_rewards bool: True = group, False = none
    acfg.scale = c["scale_rewards"].get<bool>() ? RewardScale::group : RewardScale::none;
    std::vector<float> adv_seq(static_cast<size_t>(B)), adv(static_cast<size_t>(N)), scale(static_cast<size_t>(N));
    compute_advantages(acfg, rewards.data(), group.data(), B, adv_seq.data());
    expand_to_tokens(adv_seq.data(), nullptr, B, T, adv.data());
    policy_loss_scale(cfg, mask.data(), B, T, scale.data());

    // Two micro-batches (rows [0, 4T) and [4T, N)) with the whole batch's scale.
    std::vector<float> grad(static_cast<size_t>(N)), gent(static_cast<size_t>(N));
    PolicyLossStats st;
    double l1 = 0;
    for (auto [r0, r1] : {std::pair<int64_t, int64_t>{0, 4 * T}, {4 * T, N}}) {
      PolicyLossBatch mb;
      mb.old_logp = c["on_policy"].get<bool>() ? nullptr : old.data() + r0;
      mb.ref_logp = ref.data() + r0;
      mb.advantage = adv.data() + r0;
      mb.scale = scale.data() + r0;
      mb.N = r1 - r0;
      PolicyLoss loss(cfg, mb);
      for (int64_t n = 0; n < mb.N; ++n) loss.coefs(n, lp[static_cast<size_t>(r0 + n)], 1.f, &grad[static_cast<size_t>(r0 + n)], &gent[static_cast<size_t>(r0 + n)]);
      st.merge(policy_loss_forward(cfg, mb, lp.data() + r0, nullptr));
      for (int64_t n = 0; n < mb.N; ++n) {  // sum of |per-token loss|: the scale cancellation is judged on
        PolicyLossBatch one = mb;
        one.old_logp = mb.old_logp ? mb.old_logp + n : nullptr;
        one.ref_logp += n;
        one.advantage += n;
        one.scale += n;
        one.N = 1;
        l1 += std::fabs(policy_loss_forward(cfg, one, lp.data() + r0 + n, nullptr).loss);
      }
    }
    // The loss is a sum of O(l1) terms that may cancel; each term carries float rounding of A.
    EXPECT_TRUE(close(st.loss, c["loss"], tolerance(Kind::reduction, N), tolerance(Kind::elementwise) * l1)) << "loss";
    EXPECT_TRUE(all_close(grad, vec<double>(c["grad"]), tolerance(Kind::elementwise, 1, 2))) << "d loss / d logp";
    for (float x : gent) EXPECT_EQ(x, 0.f);
    if (cfg.kl_coef != 0) {
      EXPECT_TRUE(close(st.mean_kl(), c["kl"], tolerance(Kind::reduction, N))) << "mean KL";
    }
    EXPECT_TRUE(close(st.clip_frac_low(), c["clip_low"], 1e-6));
    EXPECT_TRUE(close(st.clip_frac_high(), c["clip_high"], 1e-6));
    EXPECT_TRUE(close(st.clip_frac(), c["clip_region"], 1e-6));
    EXPECT_EQ(st.tokens, static_cast<int64_t>(std::count(mask_i.begin(), mask_i.end(), 1)));
    if (cfg.dual_clip > 0) {
      EXPECT_GT(st.dual_clipped, 0) << "the golden must exercise the dual clip";
    }
    if (!c["on_policy"].get<bool>()) {
      EXPECT_GT(st.clipped_low * st.clipped_high, 0) << "both clips active";
    }
    ++seen;
  }
  EXPECT_EQ(seen, 14);
}

// ---- finite differences -------------------------------------------------------------------------

namespace {

struct FdData {
  int64_t B = 6, T = 9, N = 54;
  std::vector<float> mask, lp, old, ref, adv, w, H;
  FdData() {
    N = B * T;
    lp = test::random_vec(N, 12, 0.8f);
    for (auto& x : lp) x = -std::fabs(x) - 0.05f;
    auto d = test::random_vec(N, 13, 0.4f);
    auto e = test::random_vec(N, 14, 0.5f);
    const float a[] = {1.3f, -0.7f, 0.f, -1.1f, 0.5f, -0.4f};  // both signs, one zero
    auto ww = test::random_vec(N, 16, 0.3f);
    auto hh = test::random_vec(N, 17);
    int64_t len[] = {9, 4, 1, 7, 0, 9};  // one empty sequence
    for (int64_t b = 0; b < B; ++b)
      for (int64_t t = 0; t < T; ++t) {
        size_t i = static_cast<size_t>(b * T + t);
        mask.push_back(t < len[b] ? 1.f : 0.f);
        old.push_back(lp[i] - d[i]);
        ref.push_back(lp[i] + e[i]);
        adv.push_back(a[b]);
        w.push_back(1.f + ww[i]);
        H.push_back(std::fabs(hh[i]) + 0.1f);
      }
  }
};

// Rows whose ratio sits within `h` (in log space) of a kink of the surrogate: FD is not a derivative there.
bool near_kink(const PolicyLossConfig& c, double log_r, double h) {
  for (double k : {1 - c.eps_low, 1 + c.eps_high, c.dual_clip})
    if (k > 0 && std::fabs(log_r - std::log(k)) < 3 * h) return true;
  return false;
}

}  // namespace

TEST(PolicyLossFd, CoefsAreTheDerivativeOfTheLossEveryOption) {
  FdData D;
  int combos = 0;
  for (LossAgg agg : {LossAgg::token_mean, LossAgg::seq_mean_token_mean, LossAgg::seq_mean_token_sum_norm})
    for (int kl = 0; kl < 4; ++kl)
      for (double dual : {0.0, 1.6})
        for (double ent : {0.0, 0.03})
          for (bool weights : {false, true})
            for (bool on_policy : {false, true}) {
              PolicyLossConfig c;
              c.eps_low = 0.2;
              c.eps_high = 0.28;
              c.dual_clip = dual;
              c.kl_coef = kl ? 0.1 : 0.0;
              c.kl_estimator = kl == 1 ? KlEstimator::k1 : kl == 2 ? KlEstimator::k2 : KlEstimator::k3;
              c.ent_coef = ent;
              c.agg = agg;
              c.max_len = agg == LossAgg::seq_mean_token_sum_norm ? 12 : 0;
              SCOPED_TRACE("agg " + std::to_string(int(agg)) + " kl " + std::to_string(kl) + " dual " +
                           std::to_string(dual) + " ent " + std::to_string(ent) + " weights " +
                           std::to_string(weights) + " on_policy " + std::to_string(on_policy));
              std::vector<float> scale(static_cast<size_t>(D.N));
              policy_loss_scale(c, D.mask.data(), D.B, D.T, scale.data());
              PolicyLossBatch b;
              b.old_logp = on_policy ? nullptr : D.old.data();
              b.ref_logp = kl ? D.ref.data() : nullptr;
              b.advantage = D.adv.data();
              b.weight = weights ? D.w.data() : nullptr;
              b.scale = scale.data();
              b.N = D.N;
              PolicyLoss loss(c, b);
              PolicyLossStats st = policy_loss_forward(c, b, D.lp.data(), D.H.data());
              if (!on_policy) {
                EXPECT_GT(st.clipped_low, 0);
                EXPECT_GT(st.clipped_high, 0);
                EXPECT_LT(st.clipped_low + st.clipped_high + st.dual_clipped, st.tokens);  // and unclipped rows
                if (dual > 0) {
                  EXPECT_GT(st.dual_clipped, 0);
                }
              }
              std::vector<double> g_fd, g_an, e_fd, e_an;
              const double h = 2e-3;
              for (int64_t n = 0; n < D.N; ++n) {
                float glp, gent;
                size_t i = static_cast<size_t>(n);
                loss.coefs(n, D.lp[i], D.H[i], &glp, &gent);
                if (D.mask[i] == 0) {
                  EXPECT_EQ(glp, 0.f);
                  EXPECT_EQ(gent, 0.f);
                  continue;
                }
                if (!on_policy && near_kink(c, double(D.lp[i]) - D.old[i], h)) continue;
                auto eval = [&](std::vector<float>& x, float v) {
                  float keep = x[i];
                  x[i] = v;
                  double l = policy_loss_forward(c, b, D.lp.data(), D.H.data()).loss;
                  x[i] = keep;
                  return l;
                };
                // On-policy, old = logp detached: the ratio stays 1 while logp moves, so FD of the
                // forward (which has no detach) does not apply; the derivative is -s w A + KL term.
                if (on_policy) {
                  double s = scale[i], w = weights ? D.w[i] : 1.0;
                  double want = s * (-w * D.adv[i] + (kl ? 0.1 * policy_kl_grad(c.kl_estimator, D.lp[i], D.ref[i]) : 0.0));
                  g_fd.push_back(want);
                } else {
                  float up = D.lp[i] + float(h), dn = D.lp[i] - float(h);
                  g_fd.push_back((eval(D.lp, up) - eval(D.lp, dn)) / (double(up) - double(dn)));
                }
                g_an.push_back(glp);
                float hu = D.H[i] + float(h), hd = D.H[i] - float(h);
                e_fd.push_back((eval(D.H, hu) - eval(D.H, hd)) / (double(hu) - double(hd)));
                e_an.push_back(gent);
              }
              EXPECT_GT(g_an.size(), 20u);
              EXPECT_TRUE(all_close(g_an, g_fd, 2e-4)) << "d loss / d logp";
              EXPECT_TRUE(all_close(e_an, e_fd, 2e-4)) << "d loss / d entropy";
              ++combos;
            }
  EXPECT_EQ(combos, 3 * 4 * 2 * 2 * 2 * 2);
}

TEST(PolicyLossFd, DualClipCapsNegativeAdvantageLoss) {
  PolicyLossConfig c;
  c.eps_low = 0.2;
  c.eps_high = 0.28;
  c.dual_clip = 3;
  c.agg = LossAgg::token_mean;
  // A < 0 with r = 5 > c: loss -c A = 3 * 2 = 6 per token, zero gradient; r = 2: loss -A r = 4, grad -A r = 4.
  float old[] = {0, 0}, adv[] = {-2, -2}, scale[] = {1, 1}, lp[] = {std::log(5.f), std::log(2.f)};
  PolicyLossBatch b;
  b.old_logp = old;
  b.advantage = adv;
  b.scale = scale;
  b.N = 2;
  auto st = policy_loss_forward(c, b, lp, nullptr);
  EXPECT_NEAR(st.loss, 6 + 4, 1e-5);
  EXPECT_EQ(st.dual_clipped, 1);
  EXPECT_NEAR(st.mean_ratio(), 3.5, 1e-6);
  PolicyLoss loss(c, b);
  float g, ge;
  loss.coefs(0, lp[0], 0, &g, &ge);
  EXPECT_EQ(g, 0.f);
  loss.coefs(1, lp[1], 0, &g, &ge);
  EXPECT_NEAR(g, 4.f, 1e-5);
}

TEST(PolicyLossScale, AggregationNormalisers) {
  // B = 3, T = 4, lengths 4, 1, 0.
  std::vector<float> m = {1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0}, s(12);
  PolicyLossConfig c;
  c.agg = LossAgg::token_mean;
  policy_loss_scale(c, m.data(), 3, 4, s.data());
  EXPECT_FLOAT_EQ(s[0], 1.f / 5);
  EXPECT_EQ(s[5], 0.f);
  c.agg = LossAgg::seq_mean_token_mean;
  policy_loss_scale(c, m.data(), 3, 4, s.data());
  EXPECT_FLOAT_EQ(s[0], 1.f / 12);
  EXPECT_FLOAT_EQ(s[4], 1.f / 3);
  c.agg = LossAgg::seq_mean_token_sum_norm;
  policy_loss_scale(c, m.data(), 3, 4, s.data());
  EXPECT_FLOAT_EQ(s[0], 1.f / 12);  // max_len 0: T
  c.max_len = 10;
  policy_loss_scale(c, m.data(), 3, 4, s.data());
  EXPECT_FLOAT_EQ(s[4], 1.f / 30);
  // Data-parallel: normalisers of the global batch (here: twice as many tokens and sequences).
  LossNorm g = policy_loss_norm(m.data(), 3, 4);
  EXPECT_EQ(g.tokens, 5);
  EXPECT_EQ(g.seqs, 3);
  g.tokens *= 2;
  g.seqs *= 2;
  c.agg = LossAgg::token_mean;
  policy_loss_scale(c, m.data(), 3, 4, g, s.data());
  EXPECT_FLOAT_EQ(s[0], 1.f / 10);
}

TEST(PolicyLossScale, RejectsBadConfig) {
  PolicyLossConfig c;
  c.dual_clip = 0.5;
  EXPECT_THROW(c.validate(), Error);
  c = {};
  c.eps_low = 1.0;
  EXPECT_THROW(c.validate(), Error);
  c = {};
  c.kl_coef = 0.1;
  float a = 1, s = 1;
  PolicyLossBatch b;
  b.advantage = &a;
  b.scale = &s;
  b.N = 1;
  EXPECT_THROW(PolicyLoss(c, b), Error);  // KL without ref_logp
}

TEST(PolicyLoss, NoGradientOnlyWhenEveryCoefficientIsZero) {
  // Advantage 0, or weight 0, or out of the loss (scale 0) at every row, and no KL, entropy or reverse-KL term:
  // no gradient (and coefs gives 0 at any log-prob). Any one row with a signal, or any such term: a gradient.
  std::vector<float> adv = {0, 0, 0.5f}, w = {1, 1, 0}, scale = {0.25f, 0.25f, 0.25f}, old = {-1, -2, -3};
  std::vector<float> ref = {-1, -1, -1}, logq(4, -1.3862944f);
  std::vector<const float*> rkl = {nullptr, nullptr, nullptr};
  PolicyLossBatch b;
  b.advantage = adv.data(), b.weight = w.data(), b.scale = scale.data(), b.old_logp = old.data(),
  b.ref_logp = ref.data();
  b.N = 3;
  PolicyLossConfig c;
  EXPECT_TRUE(PolicyLoss(c, b).no_gradient());
  for (float lp : {-0.5f, -1.f, -7.f})
    for (int64_t n = 0; n < 3; ++n) {
      float g_lp = 1, g_ent = 1;
      PolicyLoss(c, b).coefs(n, lp, 2.f, &g_lp, &g_ent);
      EXPECT_EQ(g_lp, 0.f);
      EXPECT_EQ(g_ent, 0.f);
    }
  c.skip_no_gradient = false;
  EXPECT_FALSE(PolicyLoss(c, b).no_gradient());
  c = {};
  c.kl_coef = 0.1;
  EXPECT_FALSE(PolicyLoss(c, b).no_gradient());
  c = {};
  c.ent_coef = 0.01;
  EXPECT_FALSE(PolicyLoss(c, b).no_gradient());
  c = {};
  w[2] = 1;  // row 2's advantage now counts
  EXPECT_FALSE(PolicyLoss(c, b).no_gradient());
  scale[2] = 0;  // but row 2 is out of the loss
  EXPECT_TRUE(PolicyLoss(c, b).no_gradient());
  rkl[1] = logq.data();  // a teacher distribution at row 1 (RCSD's reverse KL)
  b.rkl_logq = rkl.data();
  b.rkl_coef = 1.f;
  EXPECT_FALSE(PolicyLoss(c, b).no_gradient());
  b.rkl_coef = 0.f;
  EXPECT_TRUE(PolicyLoss(c, b).no_gradient());
}

// ---- through the fused classifier ---------------------------------------------------------------

TEST(PolicyLossClassifier, FusedGradientMatchesFiniteDifferencesAcrossThreads) {
  const int64_t B = 3, T = 5, N = B * T, C = 12, V = 37;
  auto h = test::random_vec(N * C, 21, 0.5f);
  auto w = test::random_vec(V * C, 22, 0.5f);
  std::vector<int32_t> tgt(static_cast<size_t>(N));
  for (int64_t n = 0; n < N; ++n) tgt[static_cast<size_t>(n)] = static_cast<int32_t>((n * 7 + 3) % V);
  std::vector<float> mask = {1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 1, 1, 1, 1, 0};
  std::vector<float> lp(static_cast<size_t>(N)), H(static_cast<size_t>(N));
  auto forward = [&](const std::vector<float>& hh) {
    kernels::ClassifierArgs a;
    a.h = hh.data(); a.w = w.data(); a.targets = tgt.data(); a.N = N; a.C = C; a.V = V;
    a.logprob = lp.data(); a.entropy = H.data();
    kernels::classifier_fused(a);
  };
  forward(h);
  // Ratios within the clip range (|log r| < 0.1): the loss is smooth in h, so central differences apply.
  auto noise = test::random_vec(N, 23, 0.03f), radv = test::random_vec(B, 24);
  std::vector<float> old(static_cast<size_t>(N)), ref(static_cast<size_t>(N)), adv(static_cast<size_t>(N)),
      scale(static_cast<size_t>(N));
  for (int64_t n = 0; n < N; ++n) {
    old[static_cast<size_t>(n)] = lp[static_cast<size_t>(n)] - noise[static_cast<size_t>(n)];
    ref[static_cast<size_t>(n)] = lp[static_cast<size_t>(n)] + 10.f * noise[static_cast<size_t>((n + 3) % N)];
  }
  expand_to_tokens(radv.data(), nullptr, B, T, adv.data());
  PolicyLossConfig c;
  c.eps_high = 0.28;
  c.dual_clip = 1.5;
  c.kl_coef = 0.2;
  c.ent_coef = 0.05;
  c.agg = LossAgg::seq_mean_token_mean;
  policy_loss_scale(c, mask.data(), B, T, scale.data());
  PolicyLossBatch b{old.data(), ref.data(), adv.data(), nullptr, scale.data(), N};
  PolicyLoss loss(c, b);

  // coefs from several threads at once equal the serial ones.
  std::vector<float> g1(static_cast<size_t>(N)), e1(static_cast<size_t>(N)), g2(g1), e2(e1);
  for (int64_t n = 0; n < N; ++n) loss.coefs(n, lp[size_t(n)], H[size_t(n)], &g1[size_t(n)], &e1[size_t(n)]);
  std::vector<std::thread> pool;
  for (int k = 0; k < 4; ++k)
    pool.emplace_back([&, k] {
      for (int rep = 0; rep < 200; ++rep)
        for (int64_t n = k; n < N; n += 4) loss.coefs(n, lp[size_t(n)], H[size_t(n)], &g2[size_t(n)], &e2[size_t(n)]);
    });
  for (auto& t : pool) t.join();
  EXPECT_EQ(g1, g2);
  EXPECT_EQ(e1, e2);

  std::vector<float> dh(static_cast<size_t>(N * C)), dw(static_cast<size_t>(V * C), 0.f);
  kernels::ClassifierArgs a;
  a.h = h.data(); a.w = w.data(); a.targets = tgt.data(); a.N = N; a.C = C; a.V = V;
  a.logprob = lp.data(); a.entropy = H.data(); a.loss = &loss; a.dh = dh.data(); a.dw = dw.data();
  kernels::classifier_fused(a);

  auto total = [&](const std::vector<float>& hh) {
    forward(hh);
    return policy_loss_forward(c, b, lp.data(), H.data()).loss;
  };
  std::vector<double> fd, an;
  const float eps = 1e-2f;
  for (int64_t i = 0; i < N * C; i += 5) {
    int64_t n = i / C;
    if (mask[size_t(n)] == 0) {
      EXPECT_EQ(dh[size_t(i)], 0.f);
      continue;
    }
    auto hp = h, hm = h;
    hp[size_t(i)] += eps;
    hm[size_t(i)] -= eps;
    fd.push_back((total(hp) - total(hm)) / (double(hp[size_t(i)]) - double(hm[size_t(i)])));
    an.push_back(dh[size_t(i)]);
  }
  EXPECT_TRUE(all_close(an, fd, 5e-3));
}
