// The vectorised control environment: N bodies of one kind, each with its own task (task.h), stepped together.
// Episodes have a fixed length (the task's seconds over the body's control period), so all N end together and
// reset(episode) starts the next; the reward after each step is -|error| (velocity error |v - v*| or position
// error |p - p*|), the metric the final-step error. Observations: the body's own plus the elapsed fraction of
// the episode; the abstract observation every body shares (0.25 p, v, elapsed fraction) is what the
// embodiment-free parts (context encoder, high level) see. Deterministic: state = (body arrays, t, episode).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "temper/control/body.h"
#include "temper/control/task.h"

namespace temper::control {

struct EnvSpec {
  BodyKind body = BodyKind::point_mass;
  TaskSpec task;
  int64_t n_envs = 64;
  uint64_t seed = 0;
  float lag_max = 0.f;  // point mass: per-episode velocity lag in [0, lag_max] s (0: direct velocity control)
};

class ControlEnv {
 public:
  static constexpr int64_t kAbstractDim = 5;  // 0.25 p, v, elapsed fraction
  explicit ControlEnv(EnvSpec spec);
  const EnvSpec& spec() const { return spec_; }
  int64_t size() const { return spec_.n_envs; }
  int64_t horizon() const { return horizon_; }  // control steps per episode
  int64_t obs_dim() const { return body_->obs_dim() + 1; }
  int64_t t() const { return t_; }
  uint64_t episode() const { return episode_; }
  bool done() const { return t_ >= horizon_; }

  void reset(uint64_t episode);                                 // the tasks of `episode`, bodies at rest at the origin
  void step(const float* action, float* reward, float* error);  // action [N, 2]; reward, error [N] after the step
  void observe(float* obs) const;                               // [N, obs_dim]
  void observe_abstract(float* obs) const;                      // [N, kAbstractDim]
  void errors(float* error) const;                              // [N] the current tracking error
  const TaskBatch& tasks() const { return tasks_; }
  const Body& body() const { return *body_; }

  // Checkpoint state: every body array by name, plus t and episode (tasks are redrawn from the episode).
  std::vector<std::pair<std::string, std::vector<float>>> save_state() const;
  void load_state(const std::vector<std::pair<std::string, std::vector<float>>>& s, int64_t t, uint64_t episode);

 private:
  EnvSpec spec_;
  std::unique_ptr<Body> body_;
  TaskBatch tasks_;
  int64_t horizon_ = 0, t_ = 0;
  uint64_t episode_ = 0;
  mutable std::vector<float> scratch_;
};

}  // namespace temper::control
