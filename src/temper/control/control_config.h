// What a control run trains (issue 40): the stage (meta: the high level and the encoder on the point mass;
// transfer: only the temporal adaptor and a low-level controller on another body, the meta-knowledge frozen;
// scratch: the baseline, an end-to-end context-conditioned PPO policy on the body), the environment, PPO, the
// hierarchy's sizes and the evaluation that decides "steps to threshold". Defaults are the recipes' defaults.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "temper/control/control_env.h"
#include "temper/control/meta_knowledge.h"
#include "temper/control/ppo.h"

namespace temper::control {

enum class Stage { meta, transfer, scratch };
Stage stage_from(const std::string& name, const std::string& where);  // "meta" | "transfer" | "scratch"
const char* stage_name(Stage s);

struct ControlConfig {
  Stage stage = Stage::meta;
  EnvSpec env;               // body, task, n_envs, seed
  int64_t iterations = 100;  // one episode of every env, then one PPO update, per iteration
  int64_t eval_every = 5;    // iterations between evaluations (deterministic, on a fixed set of tasks)
  int64_t eval_envs = 128;
  float threshold = 0.2f;                  // final-step error that counts as reached (steps to threshold)
  float reward_scale = 0.1f;               // PPO sees reward * this (returns of order 1; metrics stay unscaled)
  std::vector<int64_t> hidden = {64, 64};  // the policy's net (high level, low level or scratch)
  float init_log_std = -0.5f;
  PpoConfig ppo;
  HierarchySpec hierarchy;
  float encoder_lr = 1e-3f;  // meta: the encoder's AdamW
  int64_t encoder_epochs = 2, encoder_minibatch = 256;
  int64_t fit_envs = 256;  // meta: episodes the mode clusters are fitted on
  // transfer: the first low_iterations train the low level alone to track random subgoal velocities (uniform in
  // the disk of radius subgoal_speed, a new one every subgoal_seconds; reward -|v - g|); the rest train the
  // adaptor and the low level on the task, under the frozen high level.
  int64_t low_iterations = 40;
  float subgoal_speed = 1.6f, subgoal_seconds = 1.f;
  void validate() const;
};

}  // namespace temper::control
