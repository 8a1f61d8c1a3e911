#include "temper/control/control_env.h"

#include <cmath>

#include "temper/core/error.h"

namespace temper::control {

ControlEnv::ControlEnv(EnvSpec spec) : spec_(std::move(spec)), body_(make_body(spec_.body, spec_.lag_max)) {
  spec_.task.validate("control env");
  TEMPER_CHECK(spec_.n_envs >= 1) << "control env: n_envs must be >= 1, got " << spec_.n_envs;
  horizon_ = static_cast<int64_t>(std::llround(spec_.task.episode_seconds / body_->control_period()));
  TEMPER_CHECK(horizon_ >= 1) << "control env: episode_seconds " << spec_.task.episode_seconds
                              << " is shorter than the " << body_kind_name(spec_.body) << " control period "
                              << body_->control_period();
  reset(0);
}

void ControlEnv::reset(uint64_t episode) {
  episode_ = episode;
  t_ = 0;
  tasks_ = draw_tasks(spec_.task, spec_.seed, episode, spec_.n_envs);
  body_->reset(spec_.n_envs);
  body_->randomize(spec_.seed, episode);
}

void ControlEnv::errors(float* error) const {
  const bool vel = spec_.task.kind == TaskKind::velocity;
  const auto& x = vel ? body_->vx() : body_->px();
  const auto& y = vel ? body_->vy() : body_->py();
  for (int64_t i = 0; i < spec_.n_envs; ++i) {
    float dx = x[i] - tasks_.tx[i], dy = y[i] - tasks_.ty[i];
    error[i] = std::sqrt(dx * dx + dy * dy);
  }
}

void ControlEnv::step(const float* action, float* reward, float* error) {
  TEMPER_CHECK(t_ < horizon_) << "control env: step() after the episode's last step (" << horizon_
                              << "); call reset() first";
  body_->step(action);
  ++t_;
  errors(error);
  for (int64_t i = 0; i < spec_.n_envs; ++i) reward[i] = -error[i];
}

void ControlEnv::observe(float* obs) const {
  const int64_t d = body_->obs_dim(), n = spec_.n_envs;
  scratch_.resize(static_cast<size_t>(n * d));
  body_->observe(scratch_.data());
  const float frac = static_cast<float>(t_) / static_cast<float>(horizon_);
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < d; ++j) obs[i * (d + 1) + j] = scratch_[i * d + j];
    obs[i * (d + 1) + d] = frac;
  }
}

void ControlEnv::observe_abstract(float* obs) const {
  const float frac = static_cast<float>(t_) / static_cast<float>(horizon_);
  for (int64_t i = 0; i < spec_.n_envs; ++i) {
    float* o = obs + kAbstractDim * i;
    o[0] = 0.25f * body_->px()[i], o[1] = 0.25f * body_->py()[i];
    o[2] = body_->vx()[i], o[3] = body_->vy()[i], o[4] = frac;
  }
}

std::vector<std::pair<std::string, std::vector<float>>> ControlEnv::save_state() const {
  std::vector<std::pair<std::string, std::vector<float>>> s;
  for (auto& [name, v] : body_->state()) s.emplace_back(name, *v);
  return s;
}

void ControlEnv::load_state(const std::vector<std::pair<std::string, std::vector<float>>>& s, int64_t t,
                            uint64_t episode) {
  reset(episode);
  TEMPER_CHECK(t >= 0 && t <= horizon_) << "control env state: t " << t << " outside 0.." << horizon_;
  t_ = t;
  for (auto& [name, v] : body_->state()) {
    bool found = false;
    for (auto& [n2, v2] : s)
      if (n2 == name) {
        TEMPER_CHECK(static_cast<int64_t>(v2.size()) == spec_.n_envs)
            << "control env state: array '" << name << "' has " << v2.size() << " values, expected " << spec_.n_envs;
        *v = v2;
        found = true;
      }
    TEMPER_CHECK(found) << "control env state: array '" << name << "' of body " << body_kind_name(spec_.body)
                        << " is missing";
  }
}

}  // namespace temper::control
