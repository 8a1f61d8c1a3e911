// Reading the control recipe (see control_recipe.h).
#include "temper/app/control_recipe.h"

#include "temper/core/error.h"

namespace temper::app {

const char* const kControlDefaultRecipe =
    R"(# temper control train: meta-train the high level and the context encoder on the point mass.
[control]
stage = "meta"
body = "point_mass"
lag_max = 0.4

[run]
out = "runs/control-meta"
)";

namespace {

void visit_control(control::ControlConfig& c, ControlRunConfig& rc, std::string& stage, std::string& body,
                   KeyVisitor& v) {
  v.choice("stage", stage, "meta (point mass), transfer (a new body, meta-knowledge frozen) or scratch (baseline)",
           {"meta", "transfer", "scratch"});
  v.choice("body", body, "point_mass, second_order, second_order_slow or leg",
           {"point_mass", "second_order", "second_order_slow", "leg"});
  v("seed", c.env.seed, "seed of the tasks, the initial parameters and the action noise");
  v("n_envs", c.env.n_envs, "environments stepped together (one episode each per iteration)");
  v("lag_max", c.env.lag_max, "point mass: per-episode velocity lag drawn in [0, lag_max] s (0: direct control)");
  v("iterations", c.iterations, "iterations: one episode of every environment, then the update");
  v("eval_every", c.eval_every, "iterations between evaluations on a fixed set of tasks");
  v("eval_envs", c.eval_envs, "tasks in the evaluation");
  v("threshold", c.threshold, "final-step error that counts as reached (the steps_to_threshold metric)");
  v("reward_scale", c.reward_scale, "PPO sees reward x this");
  v("hidden", c.hidden, "hidden sizes of the policy's net (high level, low level or scratch policy)");
  v("init_log_std", c.init_log_std, "initial log standard deviation of the action noise");
  v("encoder_lr", c.encoder_lr, "meta: the context encoder's learning rate");
  v("encoder_epochs", c.encoder_epochs, "meta: passes of the encoder over each iteration's transitions");
  v("encoder_minibatch", c.encoder_minibatch, "meta: rows per encoder step");
  v("fit_envs", c.fit_envs, "meta: episodes the mode clusters are fitted on");
  v("low_iterations", c.low_iterations, "transfer: first iterations that train the low level on random subgoals");
  v("subgoal_speed", c.subgoal_speed, "transfer: random subgoal velocities lie in the disk of this radius");
  v("subgoal_seconds", c.subgoal_seconds, "transfer: seconds between random subgoals");
  v("meta_run", rc.meta_run, "transfer: the meta run directory whose newest checkpoint is frozen and reused");
  v("checkpoint_every", rc.checkpoint_every, "iterations between checkpoints (one is also written at the end)");
}

void visit_task(control::TaskSpec& t, std::string& kind, KeyVisitor& v) {
  v.choice("kind", kind, "velocity (reach and hold a target velocity) or position (reach and hold a point)",
           {"velocity", "position"});
  v("modes", t.modes, "latent modes: target directions at angle0 + 2 pi k / modes");
  v("angle0", t.angle0, "direction of mode 0 (radians)");
  v("magnitude_lo", t.magnitude_lo, "smallest target magnitude (m/s or m)");
  v("magnitude_hi", t.magnitude_hi, "largest target magnitude");
  v("episode_seconds", t.episode_seconds, "episode length in seconds (each body's own number of steps)");
}

void visit_ppo(control::PpoConfig& p, KeyVisitor& v) {
  v("lr", p.lr, "AdamW learning rate (policy and value)");
  v("gamma", p.gamma, "discount");
  v("lambda", p.lambda, "GAE lambda");
  v("epochs", p.epochs, "passes over each rollout");
  v("minibatches", p.minibatches, "minibatches per pass");
  v("max_grad_norm", p.max_grad_norm, "global gradient-norm clip (policy and value together)");
  v("clip", p.loss.clip, "ratio clip");
  v("vf_coef", p.loss.vf_coef, "value-loss coefficient");
  v("ent_coef", p.loss.ent_coef, "entropy bonus");
  v("value_hidden", p.value_hidden, "hidden sizes of the value net");
}

}  // namespace

void read_meta_hierarchy(Recipe& r, control::HierarchySpec& h, std::vector<int64_t>& high_hidden) {
  read_section(r, "control.hierarchy.", [&](KeyVisitor& v) {
    v("context", h.context, "meta: transitions in the context encoder's window");
    v("latent", h.latent, "meta: size of the encoder's latent");
    v("encoder_hidden", h.encoder_hidden, "meta: hidden sizes of the encoder and its reward decoder");
    v("max_modes", h.max_modes, "meta: most task modes the mixture prior opens");
    v("new_mode_distance", h.new_mode_distance, "meta: DP-means lambda in RMS spreads of the latents");
    v.choice("prior", h.prior, "meta: the mixture prior over modes: dp_means or stick_breaking (variational)",
             {"dp_means", "stick_breaking"});
    v("sb_alpha", h.sb_alpha, "meta: stick_breaking's concentration");
    v("sb_sigma", h.sb_sigma, "meta: stick_breaking's component sd, in RMS spreads of the latents per dimension");
  });
  high_hidden = r.get_int_list("control.hidden", high_hidden);
}

void read_control_config(Recipe& r, ControlRunConfig& rc) {
  rc = ControlRunConfig{};
  control::ControlConfig& c = rc.control;
  c.env.n_envs = 128;
  c.iterations = 250;
  c.threshold = 0.4f;
  c.ppo.lr = 1e-3f;
  c.ppo.epochs = 8;
  std::string stage = "meta", body = "point_mass", kind = "velocity";
  // The body's own action noise (control::default_init_log_std) as the default of control.init_log_std, so
  // config.toml records it and a resume reads it back.
  const float body_log_std = control::default_init_log_std(
      control::body_kind_from(r.get_string("control.body", body), r.source() + ": control.body"));
  if (body_log_std != c.init_log_std)
    r.set_default("control.init_log_std", std::to_string(body_log_std), "control.body");
  read_section(r, "control.", [&](KeyVisitor& v) { visit_control(c, rc, stage, body, v); });
  c.stage = control::stage_from(stage, r.source() + ": control.stage");
  c.env.body = control::body_kind_from(body, r.source() + ": control.body");
  read_section(r, "control.task.", [&](KeyVisitor& v) { visit_task(c.env.task, kind, v); });
  c.env.task.kind = control::task_kind_from(kind, r.source() + ": control.task.kind");
  read_section(r, "control.ppo.", [&](KeyVisitor& v) { visit_ppo(c.ppo, v); });
  std::vector<int64_t> unused = c.hidden;
  read_meta_hierarchy(r, c.hierarchy, unused);
  read_section(r, "control.hierarchy.", [&](KeyVisitor& v) {
    v("message_window", c.hierarchy.message_window, "transfer: messages the temporal adaptor sees (k)");
    v("adaptor_hidden", c.hierarchy.adaptor_hidden, "transfer: the adaptor's hidden size (2 layers)");
  });
  TEMPER_CHECK(c.stage != control::Stage::transfer || !rc.meta_run.empty())
      << r.source() << ": control.stage = \"transfer\" needs control.meta_run (a temper control train meta run)";
  TEMPER_CHECK(c.env.lag_max == 0 || c.env.body == control::BodyKind::point_mass)
      << r.source() << ": control.lag_max is the point mass's option; body is " << body;
  TEMPER_CHECK(rc.checkpoint_every >= 1) << r.source() << ": control.checkpoint_every must be >= 1";
  c.validate();
}

}  // namespace temper::app
