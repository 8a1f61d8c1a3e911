// One control run's training loop for the three stages (control_config.h): each iteration draws the tasks of
// episode `iteration`, rolls one episode of all envs with Philox action noise keyed by (seed, iteration, step),
// updates PPO (and, in the meta stage, the context encoder on the same episode), and every eval_every
// iterations evaluates the deterministic policy on a fixed set of tasks. The inputs each stage's policy sees:
//   meta      [abstract state | encoder latent]                       -> the guidance (the point mass's velocity)
//   transfer  first the low level alone, [body observation | subgoal] on random subgoals (a tracking task);
//             then [body observation | the last k messages of the frozen meta-knowledge] -> adaptor -> low level
//   scratch   [body observation | the context window]                 -> the action
// State for a checkpoint: parameters and AdamW moments as named tensors, counters in TrainerState; the noise
// and the tasks are functions of (seed, iteration), so a resumed run continues with the same bits.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "temper/control/context_window.h"
#include "temper/control/control_config.h"
#include "temper/control/meta_knowledge.h"
#include "temper/control/ppo.h"

namespace temper::control {

struct EvalResult {
  double final_error = 0, episode_return = 0, success = 0;  // means over the eval envs; success: error <= threshold
  double mode_ari = -1;                                     // the encoder's modes vs the true ones (-1: no encoder)
  int64_t modes_found = 0;
};

struct IterationMetrics {
  int64_t iteration = 0, env_steps = 0;
  double train_return = 0, train_final_error = 0, encoder_loss = 0;
  PpoStats ppo;
  std::optional<EvalResult> eval;
  int64_t steps_to_threshold = -1;  // env steps when an evaluation first reached the threshold (-1: not yet)
};

struct TrainerState {
  int64_t iteration = 0, env_steps = 0, steps_to_threshold = -1, agent_adam_step = 0, encoder_adam_step = 0;
  int64_t low_adam_step = 0;
  int64_t meta_env_steps = 0;  // transfer: the point-mass steps behind the frozen knowledge
};

class ControlTrainer {
 public:
  // transfer: `frozen` is the meta run's knowledge (required); meta and scratch: none.
  ControlTrainer(ControlConfig c, std::optional<MetaKnowledge> frozen = std::nullopt);
  const ControlConfig& config() const { return c_; }
  IterationMetrics iterate();
  // The deterministic policy on eval_envs tasks drawn with the eval key (fixed for the run); mode_ari on them.
  EvalResult evaluate(int64_t n_envs, uint64_t key) const;
  // Meta: the current encoder and high level with clusters fitted on fit_envs training tasks (fitted once per
  // iteration: an evaluation and a checkpoint of the same iteration share the fit); transfer: the frozen
  // knowledge; scratch: none.
  std::optional<MetaKnowledge> knowledge() const;

  const TrainerState& state() const { return s_; }
  std::vector<std::pair<std::string, std::vector<float>>> tensors() const;
  void load(const std::vector<std::pair<std::string, std::vector<float>>>& tensors, const TrainerState& s);
  const PpoAgent& agent() const { return agent_; }
  const PpoAgent* low_level() const { return low_ ? &*low_ : nullptr; }
  static constexpr uint64_t kEvalKey = 0xE7A1, kUnseenKey = 0x5EED;

 private:
  struct Episode;
  void run_episode(ControlEnv& env, const PpoAgent& agent, bool deterministic, uint64_t noise_seed, Episode& out) const;
  bool tracking_phase() const { return low_.has_value() && s_.iteration < c_.low_iterations; }
  void sync_low_level();  // the tracking policy's net and log_std into the transfer policy's low level
  double train_encoder(const Episode& ep);
  int64_t input_dim(const ControlEnv& env) const;
  MetaKnowledge current_meta() const;  // meta: the knowledge as trained so far (clusters not fitted)

  ControlConfig c_;
  std::optional<MetaKnowledge> frozen_;
  ControlEnv env_;
  PpoAgent agent_;
  std::optional<PpoAgent> low_;            // transfer: the low level on its tracking task
  std::optional<ContextEncoder> encoder_;  // meta only
  std::vector<float> encoder_params_;
  std::optional<nn::AdamW> encoder_opt_;
  TrainerState s_;
  Rollout rollout_;
  mutable std::optional<MetaKnowledge> fitted_;  // meta: knowledge() of the current weights; reset when they change
};

}  // namespace temper::control
