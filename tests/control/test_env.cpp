// The control environments (src/temper/control): each body's step against the same step written out by hand,
// known steady states, determinism (same seed -> same bits; tasks per env independent of N), the state a
// checkpoint keeps, and the context window's order.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "common/scratch.h"
#include "temper/control/body.h"
#include "temper/control/context_window.h"
#include "temper/control/control_env.h"
#include "temper/core/rng.h"

using namespace temper;
using namespace temper::control;

TEST(ControlBody, PointMassStepByHand) {
  PointMass b;
  b.reset(2);
  std::vector<float> a = {1.f, 0.5f, 3.f, 4.f};  // the second's norm 5 is clipped to 2: (1.2, 1.6)
  b.step(a.data());
  EXPECT_FLOAT_EQ(b.px()[0], 0.1f);
  EXPECT_FLOAT_EQ(b.py()[0], 0.05f);
  EXPECT_FLOAT_EQ(b.vx()[0], 1.f);
  EXPECT_FLOAT_EQ(b.vx()[1], 1.2f);
  EXPECT_FLOAT_EQ(b.vy()[1], 1.6f);
  EXPECT_FLOAT_EQ(b.py()[1], 0.16f);
}

TEST(ControlBody, PointMassLagByHand) {
  PointMass b(0.4f);  // each episode draws each body's lag in [0, 0.4] s
  b.reset(64);
  b.randomize(7, 2);
  auto st = b.state();
  const std::vector<float>& lag = *st.back().second;
  ASSERT_EQ(st.back().first, "lag");
  float lo = 1, hi = 0;
  for (float l : lag) lo = std::min(lo, l), hi = std::max(hi, l);
  EXPECT_GE(lo, 0.f);
  EXPECT_LE(hi, 0.4f);
  EXPECT_GT(hi - lo, 0.2f);
  std::vector<float> a(128, 0.f);
  a[0] = 1.f;
  b.step(a.data());
  b.step(a.data());
  const double k = 1.0 - std::exp(-0.1 / lag[0]);  // v += k (command - v), twice from rest
  EXPECT_NEAR(b.vx()[0], k + (1 - k) * k, 1e-6);
  EXPECT_NEAR(b.px()[0], 0.1 * (k + k + (1 - k) * k), 1e-6);
  PointMass direct;  // lag_max 0: the velocity is the command at once
  direct.reset(1);
  direct.randomize(7, 2);
  direct.step(a.data());
  EXPECT_EQ(direct.vx()[0], 1.f);
}

TEST(ControlBody, SecondOrderTwoSubstepsByHand) {
  SecondOrder b(1);  // one 10 ms substep per control period
  b.reset(1);
  const double dt = 0.01, k = dt / 0.15, F = 3.5, c = 1.5, mu = 0.2, vs = 0.05;
  std::vector<float> a = {1.f, -0.5f};
  double f = 0, v = 0, p = 0;
  for (int s = 0; s < 2; ++s) {
    b.step(a.data());
    f = f + k * (F * 1.0 - f);  // actuator lag toward F * a
    v = v + dt * (f - c * v - mu * std::tanh(v / vs));
    double p_prev = p;
    p = p + dt * v;
    EXPECT_NEAR(b.px()[0], p, 1e-9) << "substep " << s;
    EXPECT_NEAR(b.vx()[0], (p - p_prev) / dt, 1e-5) << "substep " << s;
  }
  // The first substep in numbers: f = 0.2333, v = 0.002333, p = 2.333e-5; y moves the other way at half force.
  EXPECT_NEAR(b.px()[0], 0.0000233333 + 0.0000671618, 1e-8);
  EXPECT_LT(b.py()[0], 0.f);
}

TEST(ControlBody, SecondOrderTerminalSpeedAndSlowPeriod) {
  SecondOrder fast(10), slow(20);
  fast.reset(1), slow.reset(1);
  EXPECT_DOUBLE_EQ(fast.control_period(), 0.01f * 10);
  EXPECT_DOUBLE_EQ(slow.control_period(), 0.01f * 20);
  std::vector<float> a = {1.f, 0.f};
  for (int s = 0; s < 100; ++s) fast.step(a.data());  // 10 s
  for (int s = 0; s < 50; ++s) slow.step(a.data());   // 10 s
  // m dv/dt = 0 at v = (F - mu tanh(v / vs)) / c = (3.5 - 0.2) / 1.5 = 2.2.
  EXPECT_NEAR(fast.vx()[0], 2.2f, 1e-3);
  EXPECT_NEAR(slow.vx()[0], 2.2f, 1e-3);
  EXPECT_FLOAT_EQ(fast.px()[0], slow.px()[0]);  // the same physics, held twice as long per action
}

TEST(ControlBody, LegSpeedIsNonlinearInFrequency) {
  Leg leg;
  // f = 2.5: A = 0.6 / 2 = 0.3; x(q) = 0.6 sin q + 0.6 sin(q - 0.4); stride = x(0.3) - x(-0.3) = 0.68125.
  double x_hi = 0.6 * std::sin(0.3) + 0.6 * std::sin(-0.1), x_lo = 0.6 * std::sin(-0.3) + 0.6 * std::sin(-0.7);
  EXPECT_NEAR(leg.speed_at(2.5f), 2.5 * (x_hi - x_lo), 1e-5);
  EXPECT_NEAR(leg.speed_at(2.5f), 1.7031, 1e-3);
  EXPECT_GT(leg.speed_at(2.7f), leg.speed_at(4.f));  // faster gait, shorter stride: slower
  EXPECT_GT(leg.speed_at(2.7f), leg.speed_at(1.f));
  EXPECT_NEAR(leg.speed_at(1.f) / leg.speed_at(0.5f), 1.81, 0.02);  // below 2x: the stride already shortens

  leg.reset(1);
  std::vector<float> a = {2.5f / 4.f, 0.f};         // f_cmd 2.5 Hz, heading 0
  for (int s = 0; s < 40; ++s) leg.step(a.data());  // 4 s: frequency settled
  double x0 = leg.px()[0];
  for (int s = 0; s < 4; ++s) leg.step(a.data());  // one gait cycle (0.4 s): the ripple averages out
  EXPECT_NEAR((leg.px()[0] - x0) / 0.4, 1.7031, 0.01);
  EXPECT_NEAR(leg.py()[0], 0.f, 1e-5);

  std::vector<float> up = {0.f, 0.5f};  // heading command pi/2: turns at 4 rad/s
  leg.step(up.data());
  std::vector<float> obs(9);
  leg.observe(obs.data());
  EXPECT_NEAR(std::atan2(obs[5], obs[4]), 0.4, 1e-5);
}

TEST(ControlBody, LegActionNoiseMatchesItsUsefulRange) {
  // The leg's speed peaks at |a| = f_peak / f_max < 0.7: its default action noise is smaller than the unit-range
  // bodies' by about that factor (std 0.37 vs 0.61).
  Leg leg;
  float best = 0.f, a_peak = 0.f;
  for (int k = 1; k <= 100; ++k) {
    float a = 0.01f * float(k), v = leg.speed_at(a * leg.params().f_max);
    if (v > best) best = v, a_peak = a;
  }
  EXPECT_GT(a_peak, 0.6f);
  EXPECT_LT(a_peak, 0.75f);
  EXPECT_FLOAT_EQ(default_init_log_std(BodyKind::leg), -1.f);
  for (BodyKind k : {BodyKind::point_mass, BodyKind::second_order, BodyKind::second_order_slow})
    EXPECT_FLOAT_EQ(default_init_log_std(k), -0.5f);
  double ratio = std::exp(default_init_log_std(BodyKind::leg)) / std::exp(default_init_log_std(BodyKind::second_order));
  EXPECT_NEAR(ratio, a_peak, 0.1);
}

TEST(ControlTask, DrawsAreMagnitudeTimesModeDirection) {
  TaskSpec s;
  s.modes = 4;
  TaskBatch b = draw_tasks(s, 7, 3, 400), few = draw_tasks(s, 7, 3, 5), other = draw_tasks(s, 7, 4, 5);
  std::vector<int> count(4, 0);
  for (int i = 0; i < 400; ++i) {
    ++count[b.mode[i]];
    EXPECT_GE(b.magnitude[i], s.magnitude_lo);
    EXPECT_LE(b.magnitude[i], s.magnitude_hi);
    double ang = M_PI / 2 * b.mode[i];
    EXPECT_NEAR(b.tx[i], b.magnitude[i] * std::cos(ang), 1e-6);
    EXPECT_NEAR(b.ty[i], b.magnitude[i] * std::sin(ang), 1e-6);
  }
  for (int k = 0; k < 4; ++k) EXPECT_GT(count[k], 70) << "mode " << k;
  int same = 0;
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(few.magnitude[i], b.magnitude[i]);  // env i's task does not depend on N
    same += other.magnitude[i] == b.magnitude[i];
  }
  EXPECT_EQ(same, 0);  // another episode, other tasks
}

namespace {
std::vector<float> random_actions(uint64_t seed, int64_t step, int64_t n) {
  Rng r(seed, static_cast<uint64_t>(step));
  std::vector<float> a(static_cast<size_t>(2 * n));
  for (float& x : a) x = r.normal();
  return a;
}
}  // namespace

TEST(ControlEnv, SameSeedSameBitsAndStateRoundTrip) {
  for (BodyKind kind : {BodyKind::point_mass, BodyKind::second_order, BodyKind::second_order_slow, BodyKind::leg}) {
    EnvSpec spec;
    spec.body = kind;
    spec.n_envs = 16;
    spec.seed = 5;
    ControlEnv a(spec), b(spec);
    std::vector<float> ra(16), ea(16), rb(16), eb(16), oa(16 * a.obs_dim()), ob(16 * a.obs_dim());
    for (int64_t t = 0; t < 7; ++t) {
      auto act = random_actions(1, t, 16);
      a.step(act.data(), ra.data(), ea.data());
      b.step(act.data(), rb.data(), eb.data());
    }
    ControlEnv c(spec);
    c.load_state(a.save_state(), a.t(), a.episode());
    for (int64_t t = 7; t < 12; ++t) {
      auto act = random_actions(1, t, 16);
      a.step(act.data(), ra.data(), ea.data());
      c.step(act.data(), rb.data(), eb.data());
      EXPECT_EQ(ra, rb) << body_kind_name(kind) << " t " << t;
    }
    a.observe(oa.data());
    c.observe(ob.data());
    EXPECT_EQ(oa, ob) << body_kind_name(kind);
    for (int64_t i = 0; i < 16; ++i) EXPECT_FLOAT_EQ(ra[i], -ea[i]);
  }
}

TEST(ControlEnv, RewardIsMinusTrackingErrorAndEpisodesEnd) {
  EnvSpec spec;
  spec.n_envs = 3;
  spec.seed = 11;
  ControlEnv env(spec);
  EXPECT_EQ(env.horizon(), 40);  // 4 s at 0.1 s
  std::vector<float> act(6), r(3), e(3), half(6);
  for (int i = 0; i < 3; ++i) act[2 * i] = env.tasks().tx[i], act[2 * i + 1] = env.tasks().ty[i];
  for (int i = 0; i < 6; ++i) half[i] = 0.5f * act[i];
  env.step(half.data(), r.data(), e.data());
  for (int i = 0; i < 3; ++i) EXPECT_NEAR(e[i], 0.5f * env.tasks().magnitude[i], 1e-6);
  while (!env.done()) env.step(act.data(), r.data(), e.data());
  for (int i = 0; i < 3; ++i) EXPECT_EQ(r[i], 0.f);
  temper::test::expect_error([&] { env.step(act.data(), r.data(), e.data()); }, {"after the episode's last step"});
  spec.body = BodyKind::second_order_slow;
  EXPECT_EQ(ControlEnv(spec).horizon(), 20);
  temper::test::expect_error([] { body_kind_from("wheel", "recipe.toml [control] body"); },
                             {"recipe.toml [control] body", "'wheel'", "point_mass, second_order"});
}

TEST(ControlEnv, PositionTaskScoresTheDistanceToThePoint) {
  EnvSpec spec;
  spec.n_envs = 4;
  spec.task.kind = TaskKind::position;
  spec.task.magnitude_lo = 1.f, spec.task.magnitude_hi = 2.f;
  ControlEnv env(spec);
  std::vector<float> act(8), r(4), e(4);
  const float per_step = 1.f / (env.horizon() * PointMass::kPeriod);  // arrive exactly at the last step
  for (int i = 0; i < 4; ++i) act[2 * i] = env.tasks().tx[i] * per_step, act[2 * i + 1] = env.tasks().ty[i] * per_step;
  env.step(act.data(), r.data(), e.data());
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(e[i], env.tasks().magnitude[i] * (1 - 1.f / env.horizon()), 1e-5);
  while (!env.done()) env.step(act.data(), r.data(), e.data());
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(e[i], 0.f, 1e-5);
}

TEST(ControlContext, NewestFirstWithValidFlags) {
  ContextWindow w(2, 3);
  std::vector<float> abs1 = {1, 2, 3, 4, 0, 5, 6, 7, 8, 0}, abs2 = {9, 9, 9, 9, 0, 1, 1, 1, 1, 0};
  std::vector<float> r1 = {-1, -2}, r2 = {-3, -4};
  w.push(abs1.data(), r1.data());
  w.push(abs2.data(), r2.data());
  const float* f = w.features();
  std::vector<float> env1(f + 18, f + 36);
  std::vector<float> want = {1, 1, 1, 1, -4, 1, 5, 6, 7, 8, -2, 1, 0, 0, 0, 0, 0, 0};
  EXPECT_EQ(env1, want);
}
