#include "temper/control/control_config.h"

#include "temper/core/error.h"

namespace temper::control {

Stage stage_from(const std::string& name, const std::string& where) {
  if (name == "meta") return Stage::meta;
  if (name == "transfer") return Stage::transfer;
  if (name == "scratch") return Stage::scratch;
  TEMPER_FAIL() << where << ": stage '" << name << "' is not one of meta, transfer, scratch";
}

const char* stage_name(Stage s) {
  switch (s) {
    case Stage::meta:
      return "meta";
    case Stage::transfer:
      return "transfer";
    case Stage::scratch:
      return "scratch";
  }
  return "?";
}

void ControlConfig::validate() const {
  const std::string w = "control";
  env.task.validate(w);
  hierarchy.validate(w + ".hierarchy");
  TEMPER_CHECK(stage != Stage::meta || env.body == BodyKind::point_mass)
      << w << ": stage meta trains the high level on the simplified agent: body must be point_mass, got "
      << body_kind_name(env.body);
  TEMPER_CHECK(env.n_envs >= 2 && env.n_envs <= 65536) << w << ": n_envs must be in 2..65536, got " << env.n_envs;
  TEMPER_CHECK(iterations >= 1) << w << ": iterations must be >= 1, got " << iterations;
  TEMPER_CHECK(eval_every >= 1) << w << ": eval_every must be >= 1, got " << eval_every;
  TEMPER_CHECK(eval_envs >= 2) << w << ": eval_envs must be >= 2, got " << eval_envs;
  TEMPER_CHECK(fit_envs >= 2) << w << ": fit_envs must be >= 2, got " << fit_envs;
  TEMPER_CHECK(threshold > 0) << w << ": threshold must be > 0, got " << threshold;
  TEMPER_CHECK(reward_scale > 0) << w << ": reward_scale must be > 0, got " << reward_scale;
  TEMPER_CHECK(!hidden.empty()) << w << ": hidden needs at least one layer size";
  TEMPER_CHECK(ppo.lr > 0 && ppo.gamma > 0 && ppo.gamma <= 1 && ppo.lambda >= 0 && ppo.lambda <= 1)
      << w << ".ppo: lr > 0, gamma in (0, 1], lambda in [0, 1]; got " << ppo.lr << ", " << ppo.gamma << ", "
      << ppo.lambda;
  TEMPER_CHECK(ppo.loss.clip > 0) << w << ".ppo: clip must be > 0, got " << ppo.loss.clip;
  TEMPER_CHECK(low_iterations >= 0 && subgoal_speed > 0 && subgoal_seconds > 0)
      << w << ": low_iterations >= 0, subgoal_speed > 0, subgoal_seconds > 0; got " << low_iterations << ", "
      << subgoal_speed << ", " << subgoal_seconds;
  TEMPER_CHECK(encoder_lr > 0 && encoder_epochs >= 0 && encoder_minibatch >= 2)
      << w << ": encoder_lr > 0, encoder_epochs >= 0, encoder_minibatch >= 2; got " << encoder_lr << ", "
      << encoder_epochs << ", " << encoder_minibatch;
}

}  // namespace temper::control
