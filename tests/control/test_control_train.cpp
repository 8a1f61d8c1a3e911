// The hierarchy and the trainer (src/temper/control): mode clustering and the adjusted Rand index by hand, the
// adaptor policy's gradient by finite differences, a short meta run that lowers the point mass's final error
// below what the untrained policy reaches, the frozen meta-knowledge bitwise unchanged by transfer training, and
// a resumed trainer equal bitwise to an uninterrupted one (meta, and transfer across its two phases).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "temper/control/control_trainer.h"
#include "temper/control/mode_clusters.h"
#include "temper/core/error.h"
#include "temper/core/rng.h"
#include "temper/core/thread_pool.h"

using namespace temper;
using namespace temper::control;

TEST(ControlModes, AdjustedRandIndexByHand) {
  EXPECT_DOUBLE_EQ(adjusted_rand_index({0, 0, 1, 1}, {5, 5, 2, 2}), 1.0);  // same partition, other names
  // Contingency [[2, 0], [1, 1]]: sum C(nij, 2) = 1; rows C(2,2) + C(2,2) = 2; columns C(3,2) + C(1,2) = 3;
  // expected 2 * 3 / C(4,2) = 1, max (2 + 3) / 2 = 2.5: ARI = (1 - 1) / (2.5 - 1) = 0.
  EXPECT_NEAR(adjusted_rand_index({0, 0, 1, 1}, {0, 0, 0, 1}), 0.0, 1e-12);
  EXPECT_LT(adjusted_rand_index({0, 1, 0, 1, 0, 1}, {0, 0, 0, 1, 1, 1}), 0.0);
}

TEST(ControlModes, DpMeansFindsTheModesAndNoMore) {
  // Four blobs (sd 0.1) at the corners of a square of side 2; 200 points in a shuffled order.
  std::vector<float> x;
  std::vector<int32_t> truth;
  Rng r(9, 0);
  for (int i = 0; i < 200; ++i) {
    int k = static_cast<int>(r.next_u32() % 4);
    x.push_back((k & 1 ? 1.f : -1.f) + 0.1f * r.normal());
    x.push_back((k & 2 ? 1.f : -1.f) + 0.1f * r.normal());
    truth.push_back(k);
  }
  ModeClusters m(2, 8);
  std::vector<int32_t> found = m.fit(x.data(), 200, 1.0f);  // lambda = 1 x RMS spread (~1.4): between the blobs
  EXPECT_EQ(m.modes(), 4);
  EXPECT_DOUBLE_EQ(adjusted_rand_index(truth, found), 1.0);
  float p[2] = {0.9f, -1.1f};
  EXPECT_EQ(m.assign(p), found[std::find(truth.begin(), truth.end(), 1) - truth.begin()]);
  ModeClusters back(2, 8);
  back.from_vector(m.to_vector());
  EXPECT_EQ(back.centres(), m.centres());
  ModeClusters one(2, 8);
  one.fit(x.data(), 200, 3.0f);  // lambda larger than the data: one mode
  EXPECT_EQ(one.modes(), 1);
}

TEST(ControlModes, StickBreakingFindsTheModesAndLabelsUnseenTasks) {
  // Four blobs (sd 0.15) at the corners of a square of side 2 in 3-D (third coordinate noise only): fit on 200
  // points with 8 sticks, then assign 400 unseen points of the same blobs.
  auto draw = [](uint64_t stream, int n, std::vector<float>& x, std::vector<int32_t>& truth) {
    Rng r(11, stream);
    for (int i = 0; i < n; ++i) {
      int k = static_cast<int>(r.next_u32() % 4);
      x.push_back((k & 1 ? 1.f : -1.f) + 0.15f * r.normal());
      x.push_back((k & 2 ? 1.f : -1.f) + 0.15f * r.normal());
      x.push_back(0.15f * r.normal());
      truth.push_back(k);
    }
  };
  std::vector<float> x, u;
  std::vector<int32_t> truth, unseen_truth;
  draw(0, 200, x, truth);
  draw(1, 400, u, unseen_truth);
  ModeClusters m(3, 8);
  std::vector<int32_t> found = m.fit_stick_breaking(x.data(), 200, 1.0f, 0.2f);
  EXPECT_EQ(m.modes(), 4);
  EXPECT_DOUBLE_EQ(adjusted_rand_index(truth, found), 1.0);
  std::vector<int32_t> unseen;
  for (int i = 0; i < 400; ++i) unseen.push_back(m.assign(&u[3 * i]));
  EXPECT_GT(adjusted_rand_index(unseen_truth, unseen), 0.99);
  // Components much wider than the blobs (sd 2 x the spread): one mode takes everything.
  ModeClusters wide(3, 8);
  wide.fit_stick_breaking(x.data(), 200, 1.0f, 2.0f);
  EXPECT_EQ(wide.modes(), 1);
}

TEST(ControlModes, StickBreakingWithNoModeKeepsTheLargestStick) {
  // Three points far apart (1-D) with narrow components and as many sticks as points: each point takes one
  // stick whole, so no stick holds more than one point's worth and the fit falls back to a single mode. It must
  // be the largest stick: on equal responsibility the first, the one with the largest expected weight, opened
  // by the point nearest the data's mean (0.5), not the last one (opened by 10, the farthest).
  const std::vector<float> x = {-10.f, 0.5f, 10.f};
  ModeClusters m(1, 3);
  const std::vector<int32_t> found = m.fit_stick_breaking(x.data(), 3, 1.0f, 0.01f);
  ASSERT_EQ(m.modes(), 1);
  EXPECT_NEAR(m.centres()[0], 0.5f, 0.01f);
  EXPECT_EQ(found, (std::vector<int32_t>{0, 0, 0}));
}

TEST(ControlPolicy, AdaptorChainGradientMatchesFiniteDifferences) {
  PolicySpec s;
  s.obs_dim = 3, s.msg_dim = 8, s.hidden = {6}, s.adaptor_hidden = 5, s.residual = 2;
  GaussianPolicy pi(s);
  std::vector<float> p(pi.param_count()), x(4 * 11), dm(4 * 2), grad(pi.param_count(), 0.f), mean(8);
  pi.init(p.data(), 3);
  Rng r(4, 0);
  for (float& v : p) v += 0.3f * r.normal();  // away from the small-output init
  for (float& v : x) v = r.normal();
  for (float& v : dm) v = r.normal();
  GaussianPolicy::Tape t;
  pi.mean(p.data(), x.data(), 4, mean.data(), &t);
  pi.backward(p.data(), t, dm.data(), grad.data());
  auto objective = [&] {
    pi.mean(p.data(), x.data(), 4, mean.data());
    double s = 0;
    for (int i = 0; i < 8; ++i) s += double(dm[i]) * mean[i];
    return s;
  };
  for (int64_t i = 0; i < pi.log_std_offset(); i += 3) {
    float keep = p[i];
    p[i] = keep + 1e-2f;
    double up = objective();
    p[i] = keep - 1e-2f;
    double down = objective();
    p[i] = keep;
    EXPECT_NEAR(grad[i], (up - down) / 2e-2, 2e-3 * (1 + std::fabs(grad[i]))) << "param " << i;
  }
  // The residual: with the adaptor's last layer zero the subgoal is the newest guidance itself.
  const int64_t last = pi.adaptor()->param_count() - (5 * 2 + 2);
  std::fill(p.begin() + last, p.begin() + pi.adaptor()->param_count(), 0.f);
  std::vector<float> g0(8), g1(8);
  pi.subgoal(p.data(), x.data(), 4, g0.data());
  x[3 + 2] += 0.5f;
  pi.subgoal(p.data(), x.data(), 4, g1.data());
  EXPECT_EQ(g0[0], x[3 + 2] - 0.5f);
  EXPECT_EQ(g1[0], x[3 + 2]);
  EXPECT_EQ(g1[1], x[3 + 3]);
}

namespace {
ControlConfig small(Stage stage, BodyKind body) {
  ControlConfig c;
  c.stage = stage;
  c.env.body = body;
  c.env.n_envs = 16;
  c.env.seed = 3;
  c.env.task.episode_seconds = 2.0;
  c.eval_every = 2, c.eval_envs = 16, c.fit_envs = 16;
  c.hidden = {16}, c.ppo.value_hidden = {16}, c.hierarchy.encoder_hidden = {16};
  c.ppo.epochs = 2;
  c.low_iterations = 2;
  return c;
}
using Tensors = std::vector<std::pair<std::string, std::vector<float>>>;
}  // namespace

TEST(ControlTrain, ShortMetaRunLowersThePointMassError) {
  set_num_threads(1);  // networks of 64 units: threads only add synchronisation (and contend with other tests)
  ControlConfig c;
  c.env.n_envs = 32;
  c.env.task.modes = 1;  // one direction: only the magnitude to infer, so a few seconds of training show it
  c.ppo.lr = 3e-3f, c.ppo.epochs = 4;
  c.eval_envs = 64;
  c.iterations = 20;
  ControlTrainer t(c);
  const double untrained = t.evaluate(64, ControlTrainer::kEvalKey).final_error;
  EXPECT_GT(untrained, 0.9);  // the policy starts near zero velocity: the error is the target's magnitude (~1)
  IterationMetrics m;
  for (int i = 0; i < 20; ++i) m = t.iterate();
  ASSERT_TRUE(m.eval.has_value());
  EXPECT_LT(m.eval->final_error, 0.5) << "untrained " << untrained;
  EXPECT_EQ(m.env_steps, 20 * 32 * 40);
}

TEST(ControlTrain, TransferLeavesTheMetaKnowledgeBitwiseUnchanged) {
  ControlTrainer meta(small(Stage::meta, BodyKind::point_mass));
  for (int i = 0; i < 2; ++i) meta.iterate();
  const MetaKnowledge k = *meta.knowledge();
  const Tensors before = k.tensors();
  ControlConfig tc = small(Stage::transfer, BodyKind::second_order);
  tc.iterations = 5;
  ControlTrainer tr(tc, k);
  const std::vector<float> low0 = tr.agent().params();
  for (int i = 0; i < 5; ++i) tr.iterate();  // 2 tracking iterations, then 3 on the task
  EXPECT_NE(tr.agent().params(), low0);      // adaptor and low level trained
  const Tensors after = tr.knowledge()->tensors();
  ASSERT_EQ(after.size(), before.size());
  for (size_t i = 0; i < before.size(); ++i) EXPECT_EQ(after[i].second, before[i].second) << before[i].first;
  // The transfer checkpoint carries the frozen copy, equal bitwise too.
  for (auto& [name, v] : tr.tensors())
    for (auto& [bn, bv] : before) {
      if (name == bn) {
        EXPECT_EQ(v, bv) << name;
      }
    }
  EXPECT_THROW(ControlTrainer{small(Stage::transfer, BodyKind::leg)}, Error);  // transfer needs knowledge
}

TEST(ControlTrain, ResumedTrainerEqualsUninterrupted) {
  for (Stage stage : {Stage::meta, Stage::transfer, Stage::scratch}) {
    std::optional<MetaKnowledge> k;
    if (stage == Stage::transfer) {
      ControlTrainer meta(small(Stage::meta, BodyKind::point_mass));
      meta.iterate();
      k = meta.knowledge();
    }
    BodyKind body = stage == Stage::meta ? BodyKind::point_mass : BodyKind::leg;
    ControlTrainer a(small(stage, body), k), b(small(stage, body), k);
    std::vector<IterationMetrics> ma;
    for (int i = 0; i < 4; ++i) ma.push_back(a.iterate());
    for (int i = 0; i < 1; ++i) b.iterate();
    ControlTrainer c(small(stage, body), k);  // a fresh process: loads b's checkpoint after iteration 1
    c.load(b.tensors(), b.state());
    for (int i = 1; i < 4; ++i) {
      IterationMetrics mc = c.iterate();
      EXPECT_EQ(mc.train_return, ma[i].train_return) << stage_name(stage) << " iteration " << i;
      EXPECT_EQ(mc.ppo.loss, ma[i].ppo.loss) << stage_name(stage) << " iteration " << i;
      EXPECT_EQ(mc.encoder_loss, ma[i].encoder_loss);
      EXPECT_EQ(mc.eval.has_value(), ma[i].eval.has_value());
      if (mc.eval) {
        EXPECT_EQ(mc.eval->final_error, ma[i].eval->final_error);
      }
    }
    const Tensors ta = a.tensors(), tc = c.tensors();
    ASSERT_EQ(ta.size(), tc.size());
    for (size_t i = 0; i < ta.size(); ++i)
      EXPECT_EQ(ta[i].second, tc[i].second) << stage_name(stage) << " " << ta[i].first;
  }
}
