#include "temper/control/control_trainer.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "temper/core/error.h"
#include "temper/core/rng.h"

namespace temper::control {

struct ControlTrainer::Episode {
  bool record = false, keep_context = false, tracking = false;
  uint64_t subgoal_key = 0;
  Rollout* rollout = nullptr;
  std::vector<float> contexts, queries, query_reward;  // meta: [T, N, W*6], [T, N, 4], [T, N]
  std::vector<float> returns, final_error, final_latent;
};

namespace {
// Env i's subgoal at step t: uniform in the disk of radius `speed`, redrawn every `seconds` (Philox per
// (key, env, segment)).
void subgoals_at(uint64_t key, int64_t t, double period, double seconds, float speed, int64_t N, float* g) {
  const uint64_t segment = static_cast<uint64_t>(std::floor(double(t) * period / seconds + 1e-9));
  for (int64_t i = 0; i < N; ++i) {
    Rng rng(key, mix_seed(static_cast<uint64_t>(i), segment));
    float r = speed * std::sqrt(rng.uniform()), a = 6.2831853f * rng.uniform();
    g[2 * i] = r * std::cos(a), g[2 * i + 1] = r * std::sin(a);
  }
}

PolicySpec policy_spec(const ControlConfig& c, int64_t obs_dim) {
  PolicySpec s;
  s.hidden = c.hidden;
  s.init_log_std = c.init_log_std;
  s.adaptor_hidden = c.hierarchy.adaptor_hidden;
  const int64_t ctx = c.hierarchy.context * ContextWindow::kItem;
  switch (c.stage) {
    case Stage::meta:
      s.obs_dim = ControlEnv::kAbstractDim + c.hierarchy.latent;
      break;
    case Stage::scratch:
      s.obs_dim = obs_dim + ctx;
      break;
    case Stage::transfer:
      s.obs_dim = obs_dim;
      s.msg_dim = c.hierarchy.message_window * c.hierarchy.msg_dim();
      s.residual = c.hierarchy.max_modes;  // the newest message's guidance
      break;
  }
  return s;
}
}  // namespace

ControlTrainer::ControlTrainer(ControlConfig c, std::optional<MetaKnowledge> frozen)
    : c_((c.validate(), std::move(c))),
      frozen_(std::move(frozen)),
      env_(c_.env),
      agent_(policy_spec(c_, env_.obs_dim()), c_.ppo) {
  TEMPER_CHECK((c_.stage == Stage::transfer) == frozen_.has_value())
      << "control: stage " << stage_name(c_.stage)
      << (frozen_ ? " takes no meta-knowledge" : " needs the meta-knowledge of a meta run (control.meta_run)");
  agent_.init(c_.env.seed);
  if (c_.stage == Stage::transfer) {
    PolicySpec ls = policy_spec(c_, env_.obs_dim());
    ls.obs_dim = env_.obs_dim() + ls.subgoal_dim, ls.msg_dim = 0, ls.residual = -1;
    low_.emplace(ls, c_.ppo);
    low_->init(mix_seed(c_.env.seed, 41));
    sync_low_level();
  }
  if (c_.stage == Stage::meta) {
    MetaKnowledge k(c_.hierarchy, c_.hidden);
    encoder_.emplace(k.encoder.spec());
    encoder_params_.assign(static_cast<size_t>(encoder_->param_count()), 0.f);
    encoder_->init(encoder_params_.data(), mix_seed(c_.env.seed, 31));
    encoder_opt_.emplace(encoder_->param_count(), kernels::AdamWConfig{0.9f, 0.999f, 1e-8f, 0.f});
  }
  if (frozen_) s_.meta_env_steps = frozen_->meta_env_steps;
}

int64_t ControlTrainer::input_dim(const ControlEnv& env) const {
  PolicySpec s = policy_spec(c_, env.obs_dim());
  return s.obs_dim + s.msg_dim;
}

void ControlTrainer::sync_low_level() {
  const GaussianPolicy& lp = low_->policy();
  const int64_t n = lp.net().param_count(), off = agent_.policy().adaptor_params();
  TEMPER_CHECK(n == agent_.policy().net().param_count()) << "control: low level sizes differ";
  std::copy(low_->params().begin(), low_->params().begin() + lp.param_count(), agent_.params().begin() + off);
}

void ControlTrainer::run_episode(ControlEnv& env, const PpoAgent& agent, bool deterministic, uint64_t noise_seed,
                                 Episode& out) const {
  const int64_t N = env.size(), T = env.horizon(), in = agent.policy().in(), od = env.obs_dim(),
                A = ControlEnv::kAbstractDim;
  std::vector<float> goal(N * 2);
  const int64_t L = c_.hierarchy.latent;
  ContextWindow ctx(N, c_.hierarchy.context);
  MessageWindow msgs(N, c_.hierarchy.message_window, c_.hierarchy.msg_dim());
  std::vector<float> x(N * in), obs(N * od), abs(N * A), act(N * 2), logp(N), val(N), rew(N), err(N), e(N * L),
      msg(N * c_.hierarchy.msg_dim());
  out.returns.assign(N, 0.f);
  if (out.keep_context) {
    out.contexts.resize(T * N * ctx.dim());
    out.queries.resize(T * N * 4);
    out.query_reward.resize(T * N);
  }
  if (out.record) out.rollout->resize(T, N, in, 2);
  for (int64_t t = 0; t < T; ++t) {
    env.observe_abstract(abs.data());
    if (c_.stage == Stage::meta) {
      encoder_->encode(encoder_params_.data(), ctx.features(), N, e.data());
      MetaKnowledge::high_rows(abs.data(), e.data(), N, L, x.data());
    } else {
      env.observe(obs.data());
      const float* extra = ctx.features();
      int64_t ed = ctx.dim();
      if (out.tracking) {
        subgoals_at(out.subgoal_key, t, env.body().control_period(), c_.subgoal_seconds, c_.subgoal_speed, N,
                    goal.data());
        extra = goal.data(), ed = 2;
      } else if (c_.stage == Stage::transfer) {
        frozen_->messages(abs.data(), ctx.features(), N, msg.data());
        msgs.push(msg.data());
        extra = msgs.features(), ed = msgs.dim();
      }
      for (int64_t i = 0; i < N; ++i) {
        std::copy(&obs[i * od], &obs[(i + 1) * od], &x[i * in]);
        std::copy(extra + i * ed, extra + (i + 1) * ed, &x[i * in + od]);
      }
    }
    agent.act(x.data(), N, noise_seed, static_cast<uint64_t>(t), deterministic, act.data(), logp.data(),
              out.record ? val.data() : nullptr);
    if (out.record) {
      Rollout& r = *out.rollout;
      std::copy(x.begin(), x.end(), r.x.begin() + t * N * in);
      std::copy(act.begin(), act.end(), r.action.begin() + t * N * 2);
      std::copy(logp.begin(), logp.end(), r.logp.begin() + t * N);
      std::copy(val.begin(), val.end(), r.value.begin() + t * N);
    }
    env.step(act.data(), rew.data(), err.data());
    if (out.tracking)
      for (int64_t i = 0; i < N; ++i) {
        float dx = env.body().vx()[i] - goal[2 * i], dy = env.body().vy()[i] - goal[2 * i + 1];
        err[i] = std::sqrt(dx * dx + dy * dy), rew[i] = -err[i];
      }
    for (int64_t i = 0; i < N; ++i) out.returns[i] += rew[i];
    if (out.record)
      for (int64_t i = 0; i < N; ++i) {
        out.rollout->reward[t * N + i] = rew[i] * c_.reward_scale;
        out.rollout->done[t * N + i] = t + 1 == T ? 1.f : 0.f;
      }
    env.observe_abstract(abs.data());
    ctx.push(abs.data(), rew.data());
    if (out.keep_context) {
      std::copy(ctx.features(), ctx.features() + N * ctx.dim(), out.contexts.begin() + t * N * ctx.dim());
      for (int64_t i = 0; i < N; ++i) {
        std::copy(&abs[i * A], &abs[i * A + 4], out.queries.begin() + (t * N + i) * 4);
        out.query_reward[t * N + i] = rew[i];
      }
    }
  }
  out.final_error = err;
  if (out.tracking) return;
  if (c_.stage == Stage::meta) {
    out.final_latent.resize(N * L);
    encoder_->encode(encoder_params_.data(), ctx.features(), N, out.final_latent.data());
  } else if (frozen_) {
    out.final_latent.resize(N * L);
    frozen_->latents(ctx.features(), N, out.final_latent.data());
  }
}

double ControlTrainer::train_encoder(const Episode& ep) {
  const int64_t N = env_.size(), T = env_.horizon(), R = T * N, D = c_.hierarchy.context * ContextWindow::kItem;
  const int64_t mb = std::min<int64_t>(c_.encoder_minibatch, R);
  Rng rng(mix_seed(c_.env.seed, 0xE1C0), static_cast<uint64_t>(s_.iteration));
  std::vector<int64_t> idx(R);
  std::vector<float> ctx(mb * D), q(mb * 4), r(mb);
  double loss = 0;
  int64_t steps = 0;
  for (int64_t e = 0; e < c_.encoder_epochs; ++e) {
    std::iota(idx.begin(), idx.end(), 0);
    for (int64_t i = R - 1; i > 0; --i) std::swap(idx[i], idx[rng.next_u32() % static_cast<uint32_t>(i + 1)]);
    for (int64_t b = 0; b + mb <= R; b += mb) {
      for (int64_t k = 0; k < mb; ++k) {
        int64_t row = idx[b + k], env_i = row % N;
        int64_t s = static_cast<int64_t>(rng.next_u32() % static_cast<uint32_t>(T));  // a query from the same episode
        std::copy(&ep.contexts[row * D], &ep.contexts[(row + 1) * D], &ctx[k * D]);
        std::copy(&ep.queries[(s * N + env_i) * 4], &ep.queries[(s * N + env_i) * 4 + 4], &q[k * 4]);
        r[k] = ep.query_reward[s * N + env_i];
      }
      loss += encoder_->train_step(encoder_params_.data(), *encoder_opt_, c_.encoder_lr, ctx.data(), q.data(), r.data(),
                                   mb);
      ++steps;
    }
  }
  return steps ? loss / double(steps) : 0.0;
}

IterationMetrics ControlTrainer::iterate() {
  IterationMetrics m;
  fitted_.reset();
  env_.reset(static_cast<uint64_t>(s_.iteration));
  Episode ep;
  ep.record = true;
  ep.rollout = &rollout_;
  ep.keep_context = c_.stage == Stage::meta;
  ep.tracking = tracking_phase();
  ep.subgoal_key = mix_seed(mix_seed(c_.env.seed, 0x90A1), static_cast<uint64_t>(s_.iteration));
  PpoAgent& learner = ep.tracking ? *low_ : agent_;
  run_episode(env_, learner, false, mix_seed(c_.env.seed, static_cast<uint64_t>(s_.iteration)), ep);
  m.ppo = learner.update(rollout_, mix_seed(mix_seed(c_.env.seed, 0x990), static_cast<uint64_t>(s_.iteration)));
  if (ep.tracking) sync_low_level();
  if (c_.stage == Stage::meta) m.encoder_loss = train_encoder(ep);
  const double n = double(env_.size());
  for (int64_t i = 0; i < env_.size(); ++i)
    m.train_return += ep.returns[i] / n, m.train_final_error += ep.final_error[i] / n;
  s_.iteration += 1;
  s_.env_steps += env_.size() * env_.horizon();
  s_.agent_adam_step = agent_.optimizer().step;
  if (low_) s_.low_adam_step = low_->optimizer().step;
  if (encoder_opt_) s_.encoder_adam_step = encoder_opt_->step;
  if (s_.iteration % c_.eval_every == 0 || s_.iteration == c_.iterations) {
    m.eval = evaluate(c_.eval_envs, kEvalKey);
    if (s_.steps_to_threshold < 0 && m.eval->final_error <= c_.threshold) s_.steps_to_threshold = s_.env_steps;
  }
  m.iteration = s_.iteration;
  m.env_steps = s_.env_steps;
  m.steps_to_threshold = s_.steps_to_threshold;
  return m;
}

EvalResult ControlTrainer::evaluate(int64_t n_envs, uint64_t key) const {
  EnvSpec spec = c_.env;
  spec.n_envs = n_envs;
  spec.seed = mix_seed(c_.env.seed, key);
  ControlEnv env(spec);
  Episode ep;
  run_episode(env, agent_, true, 0, ep);
  EvalResult r;
  for (int64_t i = 0; i < n_envs; ++i) {
    r.final_error += ep.final_error[i] / double(n_envs);
    r.episode_return += ep.returns[i] / double(n_envs);
    r.success += (ep.final_error[i] <= c_.threshold ? 1.0 : 0.0) / double(n_envs);
  }
  if (!ep.final_latent.empty()) {
    std::optional<MetaKnowledge> k = knowledge();
    std::vector<int32_t> found(n_envs);
    for (int64_t i = 0; i < n_envs; ++i) found[i] = k->clusters.assign(&ep.final_latent[i * c_.hierarchy.latent]);
    r.mode_ari = adjusted_rand_index(env.tasks().mode, found);
    r.modes_found = k->clusters.modes();
  }
  return r;
}

MetaKnowledge ControlTrainer::current_meta() const {
  MetaKnowledge k(c_.hierarchy, c_.hidden);
  k.encoder_params = encoder_params_;
  k.high_params.assign(agent_.policy_params(), agent_.policy_params() + agent_.policy().param_count());
  k.meta_env_steps = s_.env_steps;
  return k;
}

std::optional<MetaKnowledge> ControlTrainer::knowledge() const {
  if (frozen_) return frozen_;
  if (c_.stage != Stage::meta) return std::nullopt;
  if (fitted_) return fitted_;
  MetaKnowledge k = current_meta();
  EnvSpec spec = c_.env;
  spec.n_envs = c_.fit_envs;
  spec.seed = mix_seed(c_.env.seed, 0xF17);
  ControlEnv env(spec);
  Episode ep;
  run_episode(env, agent_, true, 0, ep);
  if (c_.hierarchy.prior == "stick_breaking")
    k.clusters.fit_stick_breaking(ep.final_latent.data(), c_.fit_envs, c_.hierarchy.sb_alpha, c_.hierarchy.sb_sigma);
  else
    k.clusters.fit(ep.final_latent.data(), c_.fit_envs, c_.hierarchy.new_mode_distance);
  fitted_ = k;
  return k;
}

}  // namespace temper::control
