// The control runs (see control_run.h).
#include "temper/app/control_run.h"

#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "temper/app/control_recipe.h"
#include "temper/app/run_dir.h"
#include "temper/control/control_trainer.h"
#include "temper/core/error.h"
#include "temper/core/thread_pool.h"
#include "temper/io/atomic_file.h"

namespace temper::app {
namespace {

using control::ControlTrainer;
using control::MetaKnowledge;
using control::Stage;

nlohmann::json meta_json(const control::HierarchySpec& h, const std::vector<int64_t>& high_hidden) {
  return {{"context", h.context},
          {"latent", h.latent},
          {"encoder_hidden", h.encoder_hidden},
          {"max_modes", h.max_modes},
          {"new_mode_distance", h.new_mode_distance},
          {"high_hidden", high_hidden}};
}

SideCheckpoint to_checkpoint(const ControlTrainer& t, const std::optional<MetaKnowledge>& frozen) {
  SideCheckpoint c;
  const control::TrainerState& s = t.state();
  c.step = s.iteration;
  c.tensors = t.tensors();
  c.state = {{"stage", control::stage_name(t.config().stage)},
             {"iteration", s.iteration},
             {"env_steps", s.env_steps},
             {"steps_to_threshold", s.steps_to_threshold},
             {"agent_adam_step", s.agent_adam_step},
             {"encoder_adam_step", s.encoder_adam_step},
             {"low_adam_step", s.low_adam_step},
             {"meta_env_steps", s.meta_env_steps}};
  if (t.config().stage == Stage::meta) c.state["meta"] = meta_json(t.config().hierarchy, t.config().hidden);
  if (frozen) c.state["meta"] = meta_json(frozen->spec(), frozen->high_level.spec().hidden);
  return c;
}

control::TrainerState state_from(const SideCheckpoint& c) {
  const nlohmann::json& j = c.state;
  TEMPER_CHECK(j.contains("iteration") && j.contains("env_steps"))
      << c.from << ": not a control run's checkpoint (no iteration / env_steps in its state)";
  control::TrainerState s;
  s.iteration = j["iteration"].get<int64_t>();
  s.env_steps = j["env_steps"].get<int64_t>();
  s.steps_to_threshold = j.value("steps_to_threshold", int64_t{-1});
  s.agent_adam_step = j.value("agent_adam_step", int64_t{0});
  s.encoder_adam_step = j.value("encoder_adam_step", int64_t{0});
  s.low_adam_step = j.value("low_adam_step", int64_t{0});
  s.meta_env_steps = j.value("meta_env_steps", int64_t{0});
  return s;
}

// The meta-knowledge a checkpoint carries (a meta run's, fitted when saved; a transfer run's frozen copy).
MetaKnowledge knowledge_from(const SideCheckpoint& c) {
  TEMPER_CHECK(c.state.contains("meta")) << c.from << ": no meta-knowledge in this checkpoint (a scratch run?)";
  const nlohmann::json& m = c.state["meta"];
  control::HierarchySpec h;
  h.context = m.at("context").get<int64_t>();
  h.latent = m.at("latent").get<int64_t>();
  h.encoder_hidden = m.at("encoder_hidden").get<std::vector<int64_t>>();
  h.max_modes = m.at("max_modes").get<int64_t>();
  h.new_mode_distance = m.at("new_mode_distance").get<float>();
  const int64_t steps = c.state.value("stage", "") == "meta" ? c.state.value("env_steps", int64_t{0})
                                                             : c.state.value("meta_env_steps", int64_t{0});
  return MetaKnowledge::from_tensors(h, m.at("high_hidden").get<std::vector<int64_t>>(), c.tensors, steps, c.from);
}

// The frozen knowledge of a transfer run: its own checkpoint's copy on resume, else its meta run's newest.
std::optional<MetaKnowledge> frozen_knowledge(ControlRunConfig& cfg, const std::optional<SideCheckpoint>& ck,
                                              const std::string& command) {
  if (cfg.control.stage != Stage::transfer) return std::nullopt;
  std::optional<MetaKnowledge> k;
  if (ck) {
    k = knowledge_from(*ck);
  } else {
    const SideCheckpoint m = read_run_checkpoint(cfg.meta_run, command);
    TEMPER_CHECK(m.state.value("stage", "") == "meta")
        << m.from << ": control.meta_run must be a meta run (stage \"meta\"), this one is stage '"
        << m.state.value("stage", "?") << "'";
    k = knowledge_from(m);
  }
  control::HierarchySpec& h = cfg.control.hierarchy;  // the meta side comes from the knowledge
  const control::HierarchySpec& m = k->spec();
  h.context = m.context, h.latent = m.latent, h.encoder_hidden = m.encoder_hidden;
  h.max_modes = m.max_modes, h.new_mode_distance = m.new_mode_distance;
  return k;
}

void write_iteration(SideRun& run, const control::IterationMetrics& m, bool tracking) {
  const control::PpoStats& p = m.ppo;
  report::MetricValues train = {{"return", m.train_return},
                                {"final_error", m.train_final_error},
                                {"env_steps", double(m.env_steps)},
                                {"loss", p.loss},
                                {"policy_loss", p.policy},
                                {"value_loss", p.value},
                                {"entropy", p.entropy},
                                {"approx_kl", p.approx_kl},
                                {"clip_frac", p.clip_frac},
                                {"grad_norm", p.grad_norm},
                                {"encoder_loss", m.encoder_loss},
                                {"tracking_phase", tracking ? 1.0 : 0.0}};
  run.metrics().write(m.iteration, "train", train);
}

void print_eval(const control::IterationMetrics& m, int64_t meta_steps) {
  const control::EvalResult& e = *m.eval;
  std::fprintf(stderr, "iter %lld  env steps %lld  eval final error %.4f  success %.3f  return %.2f",
               static_cast<long long>(m.iteration), static_cast<long long>(m.env_steps), e.final_error, e.success,
               e.episode_return);
  if (e.mode_ari >= -0.5)
    std::fprintf(stderr, "  mode ARI %.3f (%lld modes)", e.mode_ari, static_cast<long long>(e.modes_found));
  if (m.steps_to_threshold >= 0)
    std::fprintf(stderr, "  threshold reached at %lld steps (+%lld meta)", static_cast<long long>(m.steps_to_threshold),
                 static_cast<long long>(meta_steps));
  std::fprintf(stderr, "\n");
}

}  // namespace

int control_train(const SideRunOptions& o) {
  const std::string cmd = "temper control train";
  ControlRunConfig cfg;  // --threads: SideRun applies it, after its signal thread (as temper flow train)
  SideRun run(cmd, o, kControlDefaultRecipe, [&](Recipe& r) { read_control_config(r, cfg); });
  const std::optional<SideCheckpoint> ck = run.open();
  std::optional<MetaKnowledge> frozen = frozen_knowledge(cfg, ck, cmd);
  ControlTrainer t(cfg.control, frozen);
  if (ck) {
    t.load(ck->tensors, state_from(*ck));
    TEMPER_CHECK(t.state().iteration == ck->step)
        << ck->from << ": the state says iteration " << t.state().iteration << ", the checkpoint " << ck->step;
  }
  run.start();
  const control::ControlConfig& c = cfg.control;
  std::fprintf(stderr, "%s: stage %s, body %s, %s task (%d modes), %lld envs x %lld iterations -> %s\n", cmd.c_str(),
               control::stage_name(c.stage), control::body_kind_name(c.env.body),
               control::task_kind_name(c.env.task.kind), c.env.task.modes, static_cast<long long>(c.env.n_envs),
               static_cast<long long>(c.iterations), run.dir().c_str());
  const auto t0 = std::chrono::steady_clock::now();
  const int64_t first = t.state().env_steps;
  while (t.state().iteration < c.iterations) {
    const bool tracking = t.low_level() && t.state().iteration < c.low_iterations;
    const control::IterationMetrics m = t.iterate();
    write_iteration(run, m, tracking);
    if (m.eval) {
      const control::EvalResult& e = *m.eval;
      run.metrics().write(m.iteration, "eval",
                          {{"final_error", e.final_error},
                           {"return", e.episode_return},
                           {"success", e.success},
                           {"mode_ari", e.mode_ari},
                           {"modes_found", double(e.modes_found)},
                           {"env_steps", double(m.env_steps)},
                           {"env_steps_with_meta", double(m.env_steps + t.state().meta_env_steps)},
                           {"steps_to_threshold", double(m.steps_to_threshold)}});
      print_eval(m, t.state().meta_env_steps);
    }
    const bool stop = run.should_stop(m.iteration);
    if (m.iteration % cfg.checkpoint_every == 0 || m.iteration == c.iterations || stop)
      run.save(to_checkpoint(t, frozen));
    if (stop) {
      std::fprintf(stderr, "%s: stopped at iteration %lld; continue with --resume %s\n", cmd.c_str(),
                   static_cast<long long>(m.iteration), run.dir().c_str());
      run.finish();
      return 0;
    }
  }
  const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const int64_t steps = t.state().env_steps - first;
  std::fprintf(stderr, "%s: %lld env steps in %.1f s (%.0f steps/s with updates and evaluations); report: %s\n",
               cmd.c_str(), static_cast<long long>(steps), sec, double(steps) / std::max(sec, 1e-9),
               run.finish().c_str());
  return 0;
}

int control_eval(const ControlEvalOptions& o) {
  const std::string cmd = "temper control eval";
  if (o.threads > 0) set_num_threads(o.threads);
  TEMPER_CHECK(o.tasks == "unseen" || o.tasks == "eval")
      << cmd << ": --tasks: expected unseen or eval, got '" << o.tasks << "'";
  TEMPER_CHECK(o.envs >= 2) << cmd << ": --envs must be >= 2, got " << o.envs;
  Recipe r = Recipe::load(recorded_config(o.run));
  ControlRunConfig cfg;
  read_control_config(r, cfg);
  const SideCheckpoint ck = read_run_checkpoint(o.run, cmd, o.fallback);
  std::optional<MetaKnowledge> frozen;
  if (cfg.control.stage == Stage::transfer) frozen = frozen_knowledge(cfg, ck, cmd);
  ControlTrainer t(cfg.control, frozen);
  t.load(ck.tensors, state_from(ck));
  const uint64_t key = o.tasks == "unseen" ? ControlTrainer::kUnseenKey : ControlTrainer::kEvalKey;
  const control::EvalResult e = t.evaluate(o.envs, key);
  const control::TrainerState& s = t.state();
  nlohmann::json j = {{"run", o.run},
                      {"checkpoint", ck.from},
                      {"stage", control::stage_name(cfg.control.stage)},
                      {"body", control::body_kind_name(cfg.control.env.body)},
                      {"tasks", o.tasks},
                      {"envs", o.envs},
                      {"iteration", s.iteration},
                      {"env_steps", s.env_steps},
                      {"meta_env_steps", s.meta_env_steps},
                      {"steps_to_threshold", s.steps_to_threshold},
                      {"threshold", cfg.control.threshold},
                      {"final_error", e.final_error},
                      {"return", e.episode_return},
                      {"success", e.success}};
  if (e.mode_ari >= -0.5) j["mode_ari"] = e.mode_ari, j["modes_found"] = e.modes_found;
  const std::string text = j.dump() + "\n";
  if (o.json_out.empty()) {
    std::fputs(text.c_str(), stdout);
  } else {
    io::write_text_atomic(o.json_out, text);
  }
  return 0;
}

}  // namespace temper::app
