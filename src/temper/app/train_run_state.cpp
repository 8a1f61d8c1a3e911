// TrainRun (train_run.h): the trainers' state in and out of checkpoints (resume, write) and held-out evaluation.
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <optional>

#include "temper/app/fault_injection.h"
#include "temper/app/train_run.h"
#include "temper/core/error.h"
#include "temper/core/interrupt.h"
#include "temper/core/thread_pool.h"
#include "temper/rl/evaluate.h"
#include "temper/rl/methods/fair.h"

namespace fs = std::filesystem;

namespace temper::app {

// Resume: weights, the optimiser of the stage, cursors, the methods' state.
void TrainRun::resume() {
  if (resume_from_.empty()) return;
  st_ = read_train_state(resume_from_);
  if (st_.stage == "rl") {
    make_rl();
    load_checkpoint(resume_from_, *policy_, &rlt_->optimizer(), reference_.get(), lora_.get());
    rlt_->restore(st_.rl_steps, st_.rl_cursor);
    if (auto it = st_.methods.find("speculative"); it != st_.methods.end()) rlt_->load_speculative_state(it->second);
    if (auto it = st_.methods.find("async"); it != st_.methods.end()) rlt_->load_async_state(it->second);
    for (auto& m : methods_) {
      auto it = st_.methods.find(m->name());
      TEMPER_CHECK(it != st_.methods.end() || m->save_state().empty())
          << resume_from_ << "/trainer_state.json: no state for method '" << m->name()
          << "' (the checkpoint was written without it; resume with the recipe it was written with)";
      if (it != st_.methods.end()) m->load_state(it->second);
    }
  } else {
    load_checkpoint(resume_from_, *policy_, &sft_->trainer().optimizer(), nullptr, lora_.get());
    sft_->restore(st_.sft_cursor);
  }
  sync_weights();
  checkpointed_step_ = st_.step;
}

// Held-out evaluation (every rank generates its share), the held-out family beside it.
double TrainRun::evaluate(int64_t step) {
  if (cfg_.env) {  // conversations: the env/ metrics of each step stand for it
    if (step == 0 && root_)
      progress_->message(
          "[env]: held-out evaluation of conversations is not there yet; env/solved and env/turns "
          "report each step");
    return NAN;
  }
  if (task_->size(tasks::Split::eval) == 0) {  // a dataset without eval_path or eval_fraction: said once
    if (step == 0 && root_)
      progress_->message(
          "no held-out problems (task.params.eval_path or eval_fraction gives some): evaluation is "
          "skipped");
    return NAN;
  }
  InterruptScope abandon_on_stop(interruptible_);
  std::optional<ThreadLimit> split;  // [rl.async]: the explorer may be generating the next batch beside it
  if (const std::atomic<int>* live = rlt_ ? rlt_->trainer_threads() : nullptr) split.emplace(*live);
  fault_signal(step, "eval");
  rl::EvalResult e = rl::evaluate(*policy_, task_, codec_, cfg_.eval, *safe_, &comm_);
  report::MetricValues v = {
      {"eval_accuracy", e.accuracy}, {"eval_len_mean", e.mean_len}, {"eval_len_correct_mean", e.mean_len_correct}};
  for (auto& [k, p] : e.pass_at_k) v.emplace_back("eval_pass_at_" + std::to_string(k), p);
  for (auto& [d, x] : e.by_difficulty) v.emplace_back("eval_accuracy_d" + std::to_string(d), x.second);
  if (!e.solved_within.empty())
    v.emplace_back("eval_revised_accuracy", e.solved_within.back());  // within eval.revisions
  for (size_t k = 0; k < e.objective_means.size(); ++k)
    v.emplace_back("eval_" + rl::fair_metric_name(cfg_.eval.objectives[k]), e.objective_means[k]);
  if (!e.objective_means.empty()) v.emplace_back("eval_welfare", e.welfare);
  if (heldout_) {
    rl::EvalResult h = rl::evaluate(*policy_, heldout_, codec_, cfg_.eval, *safe_, &comm_);
    v.emplace_back("heldout_accuracy", h.accuracy);
    v.emplace_back("heldout_len_mean", h.mean_len);
  }
  sinks_.write(step, "eval", v);
  char line[160];
  std::snprintf(line, sizeof line,
                "eval @ step %lld: accuracy %.3f over %lld held-out problems (mean length %.1f tokens)",
                static_cast<long long>(step), e.accuracy, static_cast<long long>(e.problems), e.mean_len);
  progress_->message(line);
  if (std::isnan(first_eval_)) first_eval_ = e.accuracy;
  last_eval_ = e.accuracy;
  return e.accuracy;
}

// The trainers' state after the last complete step.
TrainState TrainRun::capture(bool rl_stage) const {
  TrainState st = st_;
  st.stage = rl_stage ? "rl" : "sft";
  if (!rl_stage) st.sft_cursor = sft_->cursor();
  if (rl_stage) {
    st.rl_steps = rlt_->steps_done();
    st.rl_cursor = rlt_->cursor();
    st.methods.clear();
    for (auto& m : methods_)
      if (std::string state = m->save_state(); !state.empty()) st.methods[m->name()] = state;
    if (std::string state = rlt_->speculative_state(); !state.empty()) st.methods["speculative"] = state;
    if (std::string state = rlt_->async_state(); !state.empty()) st.methods["async"] = state;  // batches explored ahead
  }
  const Optimizer& opt = rl_stage ? rlt_->optimizer() : sft_->trainer().optimizer();
  st.opt_steps = opt.steps_done();
  st.opt_skipped = opt.skipped();
  return st;
}

void TrainRun::write_checkpoint(TrainState st, bool rl_stage) {
  Optimizer& opt = rl_stage ? rlt_->optimizer() : sft_->trainer().optimizer();
  opt.gather_moments(0);  // a sharded optimiser's full moments to the writer (every rank takes part)
  if (!root_) return;
  st_.stage = st.stage;
  sinks_.flush();
  samples_->flush();
  std::string dir = (fs::path(run_dir_) / "checkpoints" / ("step-" + std::to_string(st.step))).string();
  save_checkpoint(dir, *policy_, ex_, &opt, rl_stage ? reference_.get() : nullptr, st, config_text_,
                  fault_kill_in_checkpoint(st.step), lora_.get());
  opt.drop_gathered();
  prune_checkpoints(run_dir_, cfg_.run.keep_last);
  checkpointed_step_ = st.step;
  progress_->message("checkpoint " + dir);
}

// Evaluations run at step 0, every eval.every steps, at the end of SFT when RL follows, and at the end.
bool TrainRun::eval_due(int64_t step) const {
  const int64_t sft = cfg_.sft_steps(), total = sft + cfg_.rl_steps();
  return step == 0 || (cfg_.eval_every > 0 && step % cfg_.eval_every == 0) || (sft > 0 && step == sft && total > sft) ||
         step == total;
}

// The run's evaluations so far, from metrics.jsonl (for the summary: "at the start" is the run's, not this
// process's), and the one due at this step when a stop abandoned it (or the run is new): run first. Every rank
// follows rank 0's answer.
void TrainRun::restore_eval_history() {
  std::string missing = "0";
  if (root_) {
    std::map<int64_t, double> done;
    const fs::path m = fs::path(run_dir_) / "metrics.jsonl";
    if (!resume_from_.empty() && fs::exists(m))
      for (const report::MetricsRow& r : report::read_metrics_jsonl(m.string()))
        for (const auto& [k, v] : r.values)
          if (r.kind == "eval" && k == "eval_accuracy") done[r.step] = v;
    const int64_t sft = cfg_.sft_steps();
    if (auto it = done.find(0); it != done.end()) first_eval_ = it->second;
    if (auto it = done.find(sft); it != done.end() && sft > 0) sft_end_eval_ = it->second;
    if (!done.empty()) last_eval_ = done.rbegin()->second;
    missing = eval_due(st_.step) && !done.count(st_.step) ? "1" : "0";
  }
  comm_.broadcast(missing, 0);
  if (missing == "1") {
    double a = evaluate(st_.step);
    if (st_.step == cfg_.sft_steps() && cfg_.sft_steps() > 0) sft_end_eval_ = a;
  }
}

}  // namespace temper::app
