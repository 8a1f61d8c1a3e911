// TrainRun (train_run.h): the run directory, read before anything is written, then created and locked; the
// metrics, TensorBoard and samples files written into it.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <ostream>
#include <set>

#include "temper/app/train_run.h"
#include "temper/core/error.h"
#include "temper/core/thread_pool.h"
#include "temper/io/atomic_file.h"
#include "temper/report/tensorboard.h"
#include "temper/rl/methods/registry.h"

namespace fs = std::filesystem;

namespace temper::app {

// The run directory, read only: new (refused if it holds a run), resumed from its newest checkpoint (verified),
// or started over (a run that never wrote a checkpoint); rank 0 decides for every rank (a shared filesystem).
void TrainRun::inspect_run_dir() {
  if (root_) {
    dir_kind_ = app::inspect_run_dir(run_dir_);
    if (o_.resume.empty()) {
      TEMPER_CHECK(dir_kind_ == RunDirKind::fresh)
          << run_dir_
          << (dir_kind_ == RunDirKind::checkpointed
                  ? ": already holds a run; continue it with --resume "
                  : ": already holds a run that stopped before its first checkpoint; start it over with --resume ")
          << run_dir_ << " or choose another --out";
    } else {
      TEMPER_CHECK(dir_kind_ != RunDirKind::fresh)
          << run_dir_ << ": no run to resume (no config.toml, no checkpoint); start one with --out " << run_dir_;
      if (dir_kind_ == RunDirKind::checkpointed) resume_from_ = choose_resume_checkpoint(run_dir_, o_.fallback);
      check_resume_changes();
    }
  }
  comm_.broadcast(resume_from_, 0);
}

// --resume keeps the run's resolved config: a recipe, --set or --device that changes it is refused unless
// --allow-changes, and then listed in history.jsonl.
void TrainRun::check_resume_changes() {
  const std::string recorded = recorded_config(run_dir_);
  Recipe before = Recipe::load(recorded);
  read_run_config(before, rl::method_table());
  changes_ = config_changes(before.resolved(), recipe_.resolved());
  TEMPER_CHECK(changes_.empty() || o_.allow_changes)
      << "--resume " << run_dir_ << ": the given " << (o_.recipe.empty() ? "settings" : "recipe and settings")
      << " change the run's config (" << recorded << "): " << describe_changes(changes_)
      << ". A resumed run keeps its config; add --allow-changes to apply these (recorded in " << run_dir_
      << "/history.jsonl), or drop them";
}

// Everything checked: the directory is created (or cleared for a start-over) and locked, the config written.
void TrainRun::create_run_dir() {
  if (root_) {
    fs::create_directories(run_dir_);
    lock_ = std::make_unique<RunLock>(run_dir_);  // before anything is written: a second train on it is refused
    dir_created_ = true;
    nlohmann::json event = {{"event", resume_from_.empty() ? (o_.resume.empty() ? "start" : "restart") : "resume"},
                            {"step", st_.step},
                            {"pid", static_cast<int64_t>(getpid())}};
    if (!resume_from_.empty()) {
      if (int64_t n = remove_partial_checkpoints(run_dir_))
        std::fprintf(stderr, "temper train: removed %lld partial checkpoint(s) left by a crash\n",
                     static_cast<long long>(n));
      std::fprintf(stderr, "temper train: resuming %s from %s (step %lld)\n", run_dir_.c_str(), resume_from_.c_str(),
                   static_cast<long long>(st_.step));
      event["checkpoint"] = fs::path(resume_from_).filename().string();
      if (o_.fallback)
        for (const std::string& n : set_aside_newer_checkpoints(run_dir_, st_.step)) {
          std::fprintf(stderr, "temper train: --fallback: damaged checkpoint %s moved to %s/damaged/\n", n.c_str(),
                       run_dir_.c_str());
          event["set_aside"].push_back(n);
        }
    } else if (!o_.resume.empty()) {
      clear_run_outputs(run_dir_);
      std::fprintf(stderr, "temper train: %s stopped before its first checkpoint: starting it over from step 0\n",
                   run_dir_.c_str());
    }
    if (!changes_.empty()) {
      nlohmann::json list = nlohmann::json::array();
      for (const ConfigChange& c : changes_) list.push_back({{"key", c.key}, {"before", c.before}, {"after", c.after}});
      event["changes"] = list;
      std::fprintf(stderr, "temper train: --allow-changes: %s\n", describe_changes(changes_).c_str());
    }
    append_history(run_dir_, event);
    io::write_text_atomic((fs::path(run_dir_) / "config.toml").string(), config_text_);
    if (!curriculum_json_.empty())
      io::write_text_atomic((fs::path(run_dir_) / "curriculum.json").string(), curriculum_json_);
    std::fprintf(stderr, "%s\n", recipe_.resolved_toml(/*given_only=*/true).c_str());
    if (!cfg_.methods.empty())
      std::fprintf(stderr, "temper train: methods in hook order: %s\n", cfg_.hook_order().c_str());
    if (comm_.size() > 1)
      std::fprintf(stderr, "temper train: data-parallel over %d ranks (%s), %d thread(s) per rank\n", comm_.size(),
                   comm_.backend(), num_threads());
  }
  comm_.barrier();
}

// Sinks (rank 0 writes; a resume truncates them to the checkpoint's step) and the progress line.
void TrainRun::open_sinks() {
  const std::string mpath = (fs::path(run_dir_) / "metrics.jsonl").string(),
                    spath = (fs::path(run_dir_) / "samples.jsonl").string();
  if (!root_) {
  } else if (resume_from_.empty()) {
    sinks_.add(report::JsonlMetrics::create(mpath));
    sinks_.add(std::make_unique<report::TensorBoardWriter>(run_dir_));
    samples_ = report::SamplesJsonl::create(spath);
  } else {
    sinks_.add(report::JsonlMetrics::resume_after_step(mpath, st_.step));
    report::TensorBoardWriter::Options to;
    to.resumed_from_step = st_.step;
    sinks_.add(std::make_unique<report::TensorBoardWriter>(run_dir_, to));
    samples_ = report::SamplesJsonl::resume_after_step(spath, st_.step);
  }
  static std::ostream quiet(nullptr);  // other ranks: no progress line
  report::ProgressOptions po;
  if (!root_) po.out = &quiet, po.tty = 0;
  progress_ = std::make_unique<report::Progress>(cfg_.sft_steps() + cfg_.rl_steps(), st_.step, po);
}

// The first sample of each of the first groups (one per prompt), then more of each if there are fewer groups;
// then one sample of each kind of prompt a method built (ZPPO's candidate questions, REVES's revisions: ids
// "<id>#<kind>", after the task's groups), so the report shows what the policy was asked.
void TrainRun::write_samples(const rl::Batch& b) {
  const size_t n = b.traj.size(), per_step = static_cast<size_t>(cfg_.run.samples_per_step);
  const size_t stride =
      std::max<size_t>(1, std::min<size_t>(static_cast<size_t>(cfg_.rl.group_size), n / std::max<size_t>(1, per_step)));
  std::set<const rl::Trajectory*> written;
  auto write_sample = [&](const rl::Trajectory& t) {
    if (!written.insert(&t).second) return;
    const tasks::Problem& p = b.problems[static_cast<size_t>(t.problem)];
    report::Sample s;
    s.step = st_.step;
    s.prompt = p.shown();
    s.completion = t.text;
    s.reward = t.reward;
    s.answer = p.answer;
    s.correct = t.correct;
    for (size_t k = 0; k < t.reward_terms.size() && k < cfg_.rewards.size(); ++k)
      s.terms.emplace_back(cfg_.rewards[k].name, t.reward_terms[k]);
    s.components = t.reward_components;
    s.info = t.reward_info;
    samples_->write(s);
  };
  for (size_t i = 0; i < std::min(per_step, n); ++i) write_sample(b.traj[(i * stride) % n]);
  std::set<std::string> kinds;
  for (const rl::Trajectory& t : b.traj) {
    const tasks::Problem& p = b.problems[static_cast<size_t>(t.problem)];
    const size_t hash = p.id.rfind('#');
    if (p.index >= 0 || t.lineage.parent >= 0 || hash == std::string::npos || !kinds.insert(p.id.substr(hash)).second)
      continue;
    write_sample(t);
  }
}

}  // namespace temper::app
