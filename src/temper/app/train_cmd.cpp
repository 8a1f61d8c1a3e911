#include <signal.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "temper/app/fault_injection.h"
#include "temper/app/quickstart.h"
#include "temper/app/train_run.h"
#include "temper/core/error.h"
#include "temper/core/interrupt.h"
#include "temper/core/memory_info.h"
#include "temper/core/profile.h"
#include "temper/core/stop_signals.h"
#include "temper/core/thread_pool.h"
#include "temper/report/html_report.h"
#include "temper/rl/async_remote.h"
#include "temper/rl/methods/registry.h"

namespace temper::app {

namespace {

std::atomic<int> g_signal{0};  // the first SIGINT/SIGTERM (StopSignals' thread sets it)

}  // namespace

// Data-parallel: what this rank sent through collectives during the step and the time they took
// (waiting for slower ranks included).
void add_comm_metrics(rl::Metrics& m, const dist::Communicator& comm, int64_t bytes0, double s0) {
  if (comm.size() == 1) return;
  m.emplace_back("comm_mb", static_cast<double>(comm.bytes_sent() - bytes0) / (1 << 20));
  m.emplace_back("comm_s", comm.seconds() - s0);
}

namespace {

// The recipe: a file, the built-in quickstart, or the resumed run's resolved config; then --set and --device.
// A recipe given beside --resume stands in for the run's config (and is compared with it: check_resume_changes).
Recipe load_recipe(const TrainOptions& o) {
  Recipe recipe = !o.recipe.empty()   ? Recipe::load(o.recipe)
                  : !o.resume.empty() ? Recipe::load(recorded_config(o.resume))
                                      : Recipe::parse(quickstart_recipe(), "<built-in quickstart>");
  for (const std::string& s : o.sets) recipe.set(s);
  if (!o.device.empty()) recipe.set("model.device=\"" + o.device + "\"");
  return recipe;
}

}  // namespace

TrainRun::TrainRun(const TrainOptions& o, Recipe recipe) : o_(o), recipe_(std::move(recipe)) {
  cfg_ = read_run_config(recipe_, rl::method_table());
  recipe_.check_all_read();
  run_dir_ = !o.resume.empty() ? o.resume : !o.out.empty() ? o.out : cfg_.run.out;
  config_text_ = recipe_.resolved_toml();
  interruptible_ = comm_.size() == 1;
}

// Everything is read and checked (recipe, run directory, task, model, rewards, memory, prompts) before the run
// directory is created or changed: a refusal leaves nothing behind. Then the steps; a stop request ends them
// with a checkpoint (after the step, or at once when it abandons rollouts or an evaluation).
int TrainRun::run() {
  choose_threads();
  inspect_run_dir();
  make_task();
  start_env();
  load_policy();
  attach_lora();
  if (cfg_.env) conversation_source();  // the chat template and tool format checked before any step (then dropped)
  make_stage_tasks();
  scan_inputs();
  make_rewards();
  make_trainers();
  resume();
  if (dist::role().explorer) {  // [rl.async] explorer rank: serves the trainers' jobs until they stop
    if (!rlt_) make_rl();
    rlt_->serve_explorer(dist::world());
    return 0;
  }
  plan_memory();
  if (stop_agreed()) {  // a signal while loading: nothing written yet
    if (root_) std::fprintf(stderr, "temper train: stopped by signal %d before the run started\n", g_signal.load());
    return 0;
  }
  create_run_dir();
  try {
    open_sinks();
    train_loop();
  } catch (const Interrupted&) {
    stop_interrupted();
  } catch (const std::bad_alloc&) {
    throw;                             // "out of memory" with the memory plan's hint (main)
  } catch (const std::exception& e) {  // temper::Error, or a filesystem error (a full disk)
    TEMPER_FAIL() << e.what() << "\n(nothing is lost: continue the run with temper train --resume " << run_dir_
                  << (latest_checkpoint(run_dir_).empty() ? ", which starts it over: it has no checkpoint yet)"
                                                          : " from its newest checkpoint)");
  }
  return 0;
}

void TrainRun::train_loop() {
  restore_eval_history();
  if (run_sft() || run_rl()) return;
  finish();
}

void TrainRun::choose_threads() {
  if (const char* n = std::getenv("OMPI_COMM_WORLD_SIZE"); n && std::atoi(n) > 1) {
    TEMPER_CHECK(dist::mpi_available())
        << "temper train was started by mpirun with " << n
        << " ranks, but this temper was built without MPI (install libopenmpi-dev: scripts/bootstrap, then rebuild)";
  }
  if (o_.threads > 0)
    set_num_threads(o_.threads);
  else if (cfg_.run.threads > 0)
    set_num_threads(static_cast<int>(cfg_.run.threads));
  else if (comm_.local_size() > 1 && !std::getenv("TEMPER_THREADS")) {  // ranks on one machine share its cores
    const int share = std::max(1, default_num_threads() / comm_.local_size()), bound = cores_bound();
    if (bound < share && root_)
      std::fprintf(stderr,
                   "temper train: warning: mpirun bound each rank to %d core(s) of the %d it could use; "
                   "run with --bind-to none, or --map-by slot:PE=%d\n",
                   bound, share, share);
    set_num_threads(std::max(1, std::min(share, bound)));
  }
}

// A stop: the first signal (any rank's) or --stop-after; ranks agree so that they stop after the same step.
bool TrainRun::stop_agreed() {
  bool stop = interrupt_requested() || (o_.stop_after > 0 && st_.step >= o_.stop_after);
  if (comm_.size() > 1) {
    double any = stop ? 1 : 0;
    comm_.allreduce_max(&any, 1);
    stop = any > 0;
  }
  return stop;
}

// After each step: evaluation when due, then the checkpoint (every N steps, at the end, or when asked to stop):
// everything a step writes is written before its checkpoint, so a resume from it repeats nothing and misses
// nothing. A stop that arrives while the checkpoint is written ends the run right after it.
bool TrainRun::after_step(bool rl_stage) {
  const bool last = st_.step == cfg_.sft_steps() + cfg_.rl_steps();
  if (eval_due(st_.step)) {
    double a = evaluate(st_.step);
    if (!rl_stage && st_.sft_steps == cfg_.sft_steps() && cfg_.rl_steps() > 0) sft_end_eval_ = a;
  }
  bool stop = stop_agreed();
  if ((cfg_.run.checkpoint_every > 0 && st_.step % cfg_.run.checkpoint_every == 0) || last || stop) {
    checkpoint(rl_stage);
    if (!stop && !last) stop = stop_agreed();
  }
  if (stop && !last && root_) {
    progress_->finish();
    const int sig = g_signal.load();
    std::fprintf(
        stderr,
        "temper train: stopped %s after step %lld; checkpoint written. Continue with: temper train --resume %s\n",
        sig                                              ? ("by signal " + std::to_string(sig)).c_str()
        : o_.stop_after > 0 && st_.step >= o_.stop_after ? "(--stop-after)"
                                                         : "(another rank was signalled)",
        static_cast<long long>(st_.step), run_dir_.c_str());
  }
  return stop && !last;
}

// A signal abandoned an RL step's rollouts or an evaluation (one process only): the last complete step is
// checkpointed (an RL step's state from before it; an evaluation is run again on resume) unless it already is.
void TrainRun::stop_interrupted() {
  if (!root_) return;
  progress_->finish();
  const char* what = in_rl_step_ ? "the rollouts of step" : "the evaluation at step";
  const int64_t shown = in_rl_step_ ? st_.step + 1 : st_.step;
  if (st_.step > 0 && checkpointed_step_ != st_.step)
    write_checkpoint(in_rl_step_ ? before_step_ : capture(rlt_ != nullptr), rlt_ != nullptr);
  std::fprintf(stderr,
               "temper train: stopped by signal %d during %s %lld (abandoned: it runs again on resume); %s. "
               "Continue with: temper train --resume %s\n",
               g_signal.load(), what, static_cast<long long>(shown),
               st_.step == 0 ? "no step was complete, the run starts over"
                             : ("checkpoint step-" + std::to_string(st_.step) + " holds the run").c_str(),
               run_dir_.c_str());
}

bool TrainRun::run_sft() {
  while (st_.sft_steps < cfg_.sft_steps()) {
    const int64_t comm_bytes = comm_.bytes_sent();
    const double comm_s = comm_.seconds();
    rl::Metrics m = sft_->step();
    ++st_.step;
    fault_signal(st_.step, "end");
    ++st_.sft_steps;
    m.emplace_back("rss_mb", resident_mib());
    add_comm_metrics(m, comm_, comm_bytes, comm_s);
    sinks_.write(st_.step, "sft", m);
    progress_->update(st_.step, m);
    if (after_step(false)) return true;
  }
  return false;
}

bool TrainRun::run_rl() {
  if (cfg_.rl_steps() == 0) return false;
  if (!rlt_) {
    if (reference_) {  // the frozen KL reference: the policy as RL starts
      std::copy(policy_->params(), policy_->params() + policy_->flat_size(), reference_->params());
      reference_->params_updated();
    }
    make_rl();
  }
  watch_ = std::make_unique<LearningWatch>(cfg_.rl.max_new);
  while (rlt_->steps_done() < cfg_.rl_steps()) {
    const int64_t comm_bytes = comm_.bytes_sent();
    const double comm_s = comm_.seconds();
    if (interruptible_) before_step_ = capture(true);
    in_rl_step_ = true;
    fault_signal(st_.step + 1, "rollout");
    rl::Metrics m = rlt_->step();
    in_rl_step_ = false;
    ++st_.step;
    fault_signal(st_.step, "end");
    m.emplace_back("rss_mb", resident_mib());
    add_comm_metrics(m, comm_, comm_bytes, comm_s);
    sinks_.write(st_.step, "train", m);
    for (const std::string& w : watch_->observe(rlt_->steps_done(), m))
      if (root_) progress_->message("temper train: " + w);
    if (samples_ && cfg_.run.samples_every > 0 && rlt_->steps_done() % cfg_.run.samples_every == 0)
      write_samples(rlt_->last_batch());
    progress_->update(st_.step, m);
    if (after_step(true)) return true;
  }
  return false;
}

void TrainRun::finish() {
  progress_->finish();
  if (!root_) return;
  if (profile_enabled()) {  // TEMPER_PROFILE=1: seconds in each phase over the whole run (scopes nest)
    std::fprintf(stderr, "temper train: profile (seconds over the run; nested phases overlap):");
    for (auto& [k, v] : profile_report()) std::fprintf(stderr, " %s %.3f", k.c_str(), v);
    std::fprintf(stderr, "\n");
  }
  std::string html = report::write_html_report(run_dir_);
  if (std::isnan(first_eval_)) {
    std::fprintf(stderr, "temper train: done, %lld steps (no held-out evaluation). Report: %s\n",
                 static_cast<long long>(st_.step), html.c_str());
    return;
  }
  std::fprintf(stderr, "temper train: done, %lld steps. Held-out accuracy: %.3f at the start",
               static_cast<long long>(st_.step), first_eval_);
  if (!std::isnan(sft_end_eval_)) std::fprintf(stderr, ", %.3f after SFT (RL starts)", sft_end_eval_);
  std::fprintf(stderr, ", %.3f at the end. Report: %s\n", last_eval_, html.c_str());
}

int train(const TrainOptions& o) {
  if (o.list_keys) {
    std::fputs(list_keys_markdown(rl::method_table()).c_str(), stdout);
    return 0;
  }
  if (o.explorer_fd >= 0 || !o.connect.empty())
    return serve_explorer_process(o);  // started by a trainer (rl/async_processes.h)
  if (const char* p = std::getenv("TEMPER_PROFILE"); p && std::string(p) == "1") profile_enable(true);
  // First, before any thread exists (OpenMP's team, MPI's, the BLAS's inherit the mask): SIGINT/SIGTERM are taken
  // on one waiting thread, never by a handler interrupting library code (a handler during oneDNN's sgemm
  // corrupted its heap). The first asks for a stop; more (a burst, a second Ctrl-C) change nothing.
  StopSignals signals;
  signals.start(
      [](int sig) {
        g_signal = sig;
        request_interrupt();
        std::fprintf(stderr, "\ntemper train: %s: stopping (a checkpoint is written first; SIGKILL abandons it)\n",
                     sig == SIGINT ? "SIGINT" : "SIGTERM");
      },
      [](int) {});
  Recipe recipe = load_recipe(o);
  rl::enter_async_roles(Recipe(recipe).get_int("rl.async.explorer_ranks", 0));  // before TrainRun takes its group
  TrainRun run(o, std::move(recipe));
  return run.run();
}

}  // namespace temper::app
