// GAE on a hand-worked example and against the PyTorch golden (tools/ref/make_ppo_golden.py: CleanRL's lines in
// float64); the PPO loss's closed-form gradients against central finite differences of the loss itself.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "common/test_data.h"
#include "common/tolerance.h"
#include "temper/control/gae.h"
#include "temper/control/ppo.h"
#include "temper/control/ppo_loss.h"
#include "temper/core/rng.h"
#include "temper/io/safetensors.h"

using namespace temper;
using namespace temper::control;

TEST(ControlGae, HandExample) {
  // gamma = lambda = 0.5; the episode ends after step 1 (no bootstrap from V(s_2) into step 1).
  // t2: delta = 3 + 0.5 * 2 - 1.5 = 2.5 = A2; t1: delta = 2 - 1 = 1 = A1; t0: delta = 1 + 0.5 * 1 - 0.5 = 1,
  // A0 = 1 + 0.25 * A1 = 1.25. Returns = A + V: 1.75, 2, 4.
  std::vector<float> r = {1, 2, 3}, v = {0.5f, 1, 1.5f, 2}, d = {0, 1, 0}, adv(3), ret(3);
  gae(r.data(), v.data(), d.data(), 3, 1, 0.5f, 0.5f, adv.data(), ret.data());
  EXPECT_EQ(adv, (std::vector<float>{1.25f, 1.f, 2.5f}));
  EXPECT_EQ(ret, (std::vector<float>{1.75f, 2.f, 4.f}));
}

namespace {
std::vector<float> f32(const io::SafetensorsFile& f, const std::string& name) {
  Tensor t = f.get(name);
  std::vector<float> v(static_cast<size_t>(t.numel()));
  io::copy_to_f32(t, v.data(), t.numel(), name);
  return v;
}
std::vector<double> f64(const io::SafetensorsFile& f, const std::string& name) {
  Tensor t = f.get(name);
  EXPECT_EQ(t.dtype(), DType::f64) << name;
  const double* p = t.data<double>();
  return std::vector<double>(p, p + t.numel());
}
}  // namespace

TEST(ControlGae, MatchesCleanRlGolden) {
  auto g = io::SafetensorsFile::open(test::test_data("golden/ppo/ppo_batch.safetensors"));
  const int64_t T = 6, N = 4;
  std::vector<double> v64 = f64(g, "values");
  std::vector<float> values(v64.begin(), v64.end()), adv(T * N), ret(T * N);
  std::vector<float> rewards = f32(g, "rewards"), dones = f32(g, "dones");
  gae(rewards.data(), values.data(), dones.data(), T, N, 0.99f, 0.95f, adv.data(), ret.data());
  // Inputs rounded to f32 (values), sums in double: elementwise rtol with a sum of <= T terms.
  EXPECT_TRUE(test::all_close(adv, f64(g, "advantages"), test::tolerance(test::Kind::reduction, T)));
  EXPECT_TRUE(test::all_close(ret, f64(g, "returns"), test::tolerance(test::Kind::reduction, T)));
}

TEST(ControlPpoLoss, GradientsMatchFiniteDifferences) {
  const int64_t B = 12, A = 2;
  Rng r(3, 0);
  std::vector<float> mean(B * A), act(B * A), logstd = {-0.4f, 0.3f}, old(B), adv(B), val(B), ret(B);
  for (float& x : mean) x = r.normal();
  for (float& x : act) x = r.normal();
  for (int64_t i = 0; i < B; ++i) {
    old[i] = static_cast<float>(gaussian_logp(&mean[i * A], logstd.data(), &act[i * A], A)) + 0.3f * r.normal();
    adv[i] = r.normal(), val[i] = r.normal(), ret[i] = r.normal();
  }
  PpoLossConfig c;
  c.ent_coef = 0.05f;
  std::vector<float> dm(B * A), dl(A), dv(B), tm(B * A), tl(A), tv(B);
  PpoLossTerms base = ppo_loss(c, mean.data(), logstd.data(), act.data(), old.data(), adv.data(), val.data(),
                               ret.data(), B, A, dm.data(), dl.data(), dv.data());
  EXPECT_GT(base.clip_frac, 0.1);  // both branches exercised
  EXPECT_LT(base.clip_frac, 0.9);
  auto loss_at = [&](std::vector<float>& x, int64_t i, float h) {
    float keep = x[i];
    x[i] = keep + h;
    double l = ppo_loss(c, mean.data(), logstd.data(), act.data(), old.data(), adv.data(), val.data(), ret.data(), B, A,
                        tm.data(), tl.data(), tv.data())
                   .loss;
    x[i] = keep;
    return l;
  };
  const float h = 1e-3f;
  auto fd = [&](std::vector<float>& x, int64_t i) { return (loss_at(x, i, h) - loss_at(x, i, -h)) / (2.0 * h); };
  int64_t checked = 0;
  for (int64_t i = 0; i < B * A; ++i) {
    // Central differences straddle the clip's kink when the ratio is within ~h of 1 +- clip: not compared there.
    double ratio = std::exp(gaussian_logp(&mean[i / A * A], logstd.data(), &act[i / A * A], A) - old[i / A]);
    if (std::fabs(std::fabs(ratio - 1) - c.clip) < 1e-2) continue;
    EXPECT_NEAR(dm[i], fd(mean, i), 2e-4) << "mean " << i << " ratio " << ratio;
    ++checked;
  }
  EXPECT_GE(checked, B * A - 4);
  for (int64_t j = 0; j < A; ++j) EXPECT_NEAR(dl[j], fd(logstd, j), 2e-4) << "log_std " << j;
  for (int64_t i = 0; i < B; ++i) EXPECT_NEAR(dv[i], fd(val, i), 2e-4) << "value " << i;
}

TEST(ControlPpo, MatchesCleanRlGoldenLossAndGradients) {
  auto g = io::SafetensorsFile::open(test::test_data("golden/ppo/ppo_batch.safetensors"));
  const int64_t T = 6, N = 4, B = T * N, OBS = 5, A = 2;
  PolicySpec ps;
  ps.obs_dim = OBS, ps.hidden = {8, 8}, ps.act_dim = A;
  PpoConfig pc;
  pc.value_hidden = {8, 8};
  pc.loss.clip = 0.2f, pc.loss.vf_coef = 0.5f, pc.loss.ent_coef = 0.01f;
  PpoAgent agent(ps, pc);
  // The golden's tensors into the flat layout [actor | log_std | critic], by the layout's own names.
  auto load = [&](const nn::Mlp& net, const std::string& prefix, float* p) {
    for (auto& [name, shape] : net.param_shapes(prefix)) {
      std::vector<float> v = f32(g, name);
      p = std::copy(v.begin(), v.end(), p);
    }
  };
  float* p = agent.params().data();
  load(agent.policy().net(), "actor", p);
  std::vector<float> log_std = f32(g, "log_std");
  std::copy(log_std.begin(), log_std.end(), p + agent.policy().log_std_offset());
  load(agent.value_net(), "critic", p + agent.policy().param_count());

  std::vector<float> obs = f32(g, "obs"), values((T + 1) * N), adv(B), ret(B);
  agent.values(obs.data(), (T + 1) * N, values.data());
  EXPECT_TRUE(test::all_close(values, f64(g, "values"), test::tolerance(test::Kind::reduction, 8)));
  std::vector<float> rewards = f32(g, "rewards"), dones = f32(g, "dones");
  gae(rewards.data(), values.data(), dones.data(), T, N, 0.99f, 0.95f, adv.data(), ret.data());
  EXPECT_TRUE(test::all_close(adv, f64(g, "advantages"), test::tolerance(test::Kind::reduction, 64)));

  std::vector<float> act = f32(g, "actions"), old = f32(g, "old_logp");
  PpoLossTerms t = agent.minibatch_loss(obs.data(), act.data(), old.data(), adv.data(), ret.data(), B);
  std::vector<double> want = f64(g, "losses");  // loss, pg, v, entropy, approx_kl, clipfrac
  std::vector<double> got = {t.loss, t.policy, t.value, t.entropy, t.approx_kl, t.clip_frac};
  // f32 networks against f64: each loss is a mean over 24 rows of products of sums of <= 8 terms.
  EXPECT_TRUE(test::all_close(got, want, test::tolerance(test::Kind::reduction, B)));
  EXPECT_EQ(t.clip_frac, want[5]);  // the same samples clipped
  // Gradients: sums over the 24 rows of f32 backward products; reduction tolerance at K = 24 (1e-5).
  const float* gr = agent.grad().data();
  auto check = [&](const nn::Mlp& net, const std::string& prefix, const float* gp) {
    for (auto& [name, shape] : net.param_shapes(prefix)) {
      std::vector<double> w = f64(g, "grad." + name);
      EXPECT_TRUE(
          test::all_close(gp, w.data(), static_cast<int64_t>(w.size()), test::tolerance(test::Kind::reduction, B)))
          << name;
      gp += w.size();
    }
  };
  check(agent.policy().net(), "actor", gr);
  check(agent.value_net(), "critic", gr + agent.policy().param_count());
  EXPECT_TRUE(test::all_close(gr + agent.policy().log_std_offset(), f64(g, "grad.log_std").data(), A,
                              test::tolerance(test::Kind::reduction, B)));
}
