#include "temper/app/side_run.h"

#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <filesystem>

#include "temper/app/checkpoint.h"
#include "temper/app/run_lock.h"
#include "temper/core/error.h"
#include "temper/core/tensor.h"
#include "temper/core/thread_pool.h"
#include "temper/io/atomic_file.h"
#include "temper/io/json_file.h"
#include "temper/io/safetensors.h"
#include "temper/io/safetensors_writer.h"
#include "temper/report/html_report.h"
#include "temper/report/tensorboard.h"

namespace fs = std::filesystem;

namespace temper::app {

namespace {

constexpr const char* kStateFormat = "temper-side-run-state-1";

struct RunKeys {
  std::string out;
  int64_t keep_last = 3;
};

RunKeys read_run_keys(Recipe& r) {
  RunKeys k;
  k.out = r.get_string("run.out", "");
  k.keep_last = r.get_int("run.keep_last", 3);
  TEMPER_CHECK(k.keep_last >= 1) << r.source() << ": [run] keep_last = " << k.keep_last
                                 << ": expected at least 1 (the checkpoints kept)";
  return k;
}

Recipe load_side_recipe(const std::string& command, const SideRunOptions& o, const std::string& default_recipe) {
  Recipe r = !o.recipe.empty()   ? Recipe::load(o.recipe)
             : !o.resume.empty() ? Recipe::load(recorded_config(o.resume))
                                 : Recipe::parse(default_recipe, "<built-in " + command + " recipe>");
  for (const std::string& s : o.sets) r.set(s);
  return r;
}

SideCheckpoint read_side_checkpoint(const std::string& dir) {
  SideCheckpoint c;
  c.from = dir;
  const std::string json_path = (fs::path(dir) / "trainer_state.json").string();
  const nlohmann::json j = io::read_json_file(json_path);
  TEMPER_CHECK(j.is_object() && j.value("format", "") == kStateFormat && j.contains("step") &&
               j["step"].is_number_integer())
      << json_path << ": expected a side run's state (\"format\": \"" << kStateFormat << "\", an integer \"step\")";
  c.step = j["step"].get<int64_t>();
  if (j.contains("state")) c.state = j["state"];
  const std::string st = (fs::path(dir) / "trainer_state.safetensors").string();
  if (fs::exists(st)) {
    const io::SafetensorsFile f = io::SafetensorsFile::open(st);
    for (const std::string& name : f.names()) {
      const Tensor t = f.get(name);
      std::vector<float> v(t.numel());
      io::copy_to_f32(t, v.data(), t.numel(), st + ": " + name);
      c.tensors.push_back({name, std::move(v)});
    }
  }
  return c;
}

}  // namespace

SideCheckpoint read_run_checkpoint(const std::string& run, const std::string& command, bool fallback) {
  const std::string dir = choose_resume_checkpoint(run, fallback, command);
  TEMPER_CHECK(!dir.empty()) << run << ": the run has no checkpoint yet (" << command << " reads its newest)";
  return read_side_checkpoint(dir);
}

SideRun::SideRun(std::string command, SideRunOptions o, const std::string& default_recipe,
                 std::function<void(Recipe&)> read_config)
    : command_(std::move(command)), o_(std::move(o)), read_config_(std::move(read_config)) {
  // First, before any thread exists (OpenMP's team and the BLAS's inherit the mask): train_cmd.cpp says why.
  signals_.start(
      [this](int sig) {
        signal_ = sig;
        std::fprintf(stderr, "\n%s: %s: stopping after this step (a checkpoint is written first)\n", command_.c_str(),
                     sig == SIGINT ? "SIGINT" : "SIGTERM");
      },
      [](int) {});
  if (o_.threads > 0) set_num_threads(o_.threads);
  recipe_ = load_side_recipe(command_, o_, default_recipe);
  const RunKeys keys = read_run_keys(recipe_);
  read_config_(recipe_);
  recipe_.check_all_read();
  keep_last_ = keys.keep_last;
  dir_ = !o_.resume.empty() ? o_.resume : !o_.out.empty() ? o_.out : keys.out;
  TEMPER_CHECK(!dir_.empty()) << command_ << ": no run directory: give --out DIR (or [run] out in the recipe), or "
                              << "--resume DIR to continue one";
  config_text_ = recipe_.resolved_toml();
}

SideRun::~SideRun() = default;

std::optional<SideCheckpoint> SideRun::open() {
  kind_ = inspect_run_dir(dir_);
  if (o_.resume.empty()) {
    TEMPER_CHECK(kind_ == RunDirKind::fresh) << dir_ << ": already holds a run; continue it with " << command_
                                             << " --resume " << dir_ << " or choose another --out";
    return std::nullopt;
  }
  TEMPER_CHECK(kind_ != RunDirKind::fresh)
      << dir_ << ": no run to resume (no config.toml, no checkpoint); start one with --out " << dir_;
  check_changes();
  if (kind_ != RunDirKind::checkpointed) return std::nullopt;
  resume_from_ = choose_resume_checkpoint(dir_, o_.fallback, command_);
  SideCheckpoint c = read_side_checkpoint(resume_from_);
  resumed_step_ = c.step;
  return c;
}

// The recorded config read through the same reader, then the recipe again (the caller's structs end with its
// values); a difference is refused unless --allow-changes.
void SideRun::check_changes() {
  const std::string recorded = recorded_config(dir_);
  Recipe before = Recipe::load(recorded);
  read_run_keys(before);
  read_config_(before);
  Recipe again = load_side_recipe(command_, o_, "");
  read_run_keys(again);
  read_config_(again);
  changes_ = config_changes(before.resolved(), again.resolved());
  TEMPER_CHECK(changes_.empty() || o_.allow_changes)
      << "--resume " << dir_ << ": the given " << (o_.recipe.empty() ? "settings" : "recipe and settings")
      << " change the run's config (" << recorded << "): " << describe_changes(changes_)
      << ". A resumed run keeps its config; add --allow-changes to apply these (recorded in " << dir_
      << "/history.jsonl), or drop them";
}

void SideRun::start() {
  fs::create_directories(dir_);
  lock_ = std::make_unique<RunLock>(dir_);
  nlohmann::json event = {{"event", resume_from_.empty() ? (o_.resume.empty() ? "start" : "restart") : "resume"},
                          {"command", command_},
                          {"step", resumed_step_},
                          {"pid", static_cast<int64_t>(getpid())}};
  if (!resume_from_.empty()) {
    if (int64_t n = remove_partial_checkpoints(dir_))
      std::fprintf(stderr, "%s: removed %lld partial checkpoint(s) left by a crash\n", command_.c_str(),
                   static_cast<long long>(n));
    event["checkpoint"] = fs::path(resume_from_).filename().string();
    if (o_.fallback)
      for (const std::string& n : set_aside_newer_checkpoints(dir_, resumed_step_)) event["set_aside"].push_back(n);
    std::fprintf(stderr, "%s: resuming %s from %s (step %lld)\n", command_.c_str(), dir_.c_str(), resume_from_.c_str(),
                 static_cast<long long>(resumed_step_));
  } else if (!o_.resume.empty()) {
    clear_run_outputs(dir_);
    std::fprintf(stderr, "%s: %s stopped before its first checkpoint: starting it over from step 0\n", command_.c_str(),
                 dir_.c_str());
  }
  for (const ConfigChange& c : changes_)
    event["changes"].push_back({{"key", c.key}, {"before", c.before}, {"after", c.after}});
  append_history(dir_, event);
  io::write_text_atomic((fs::path(dir_) / "config.toml").string(), config_text_);
  const std::string mpath = (fs::path(dir_) / "metrics.jsonl").string();
  report::TensorBoardWriter::Options to;
  if (resume_from_.empty()) {
    sinks_.add(report::JsonlMetrics::create(mpath));
  } else {
    sinks_.add(report::JsonlMetrics::resume_after_step(mpath, resumed_step_));
    to.resumed_from_step = resumed_step_;
  }
  sinks_.add(std::make_unique<report::TensorBoardWriter>(dir_, to));
}

void SideRun::save(const SideCheckpoint& c) {
  TEMPER_CHECK(lock_) << command_ << ": save() before start()";
  sinks_.flush();
  const std::string dir = (fs::path(dir_) / "checkpoints" / ("step-" + std::to_string(c.step))).string();
  fs::create_directories(fs::path(dir).parent_path());
  io::write_dir_atomic(dir, [&](const std::string& tmp) {
    const fs::path t(tmp);
    if (!c.tensors.empty()) {
      std::vector<io::NamedTensor> named;
      for (const auto& [name, v] : c.tensors)
        named.push_back(
            {name, Tensor::wrap(const_cast<float*>(v.data()), {static_cast<int64_t>(v.size())}, DType::f32).clone()});
      io::write_safetensors((t / "trainer_state.safetensors").string(), named);
    }
    const nlohmann::json j = {{"format", kStateFormat}, {"command", command_}, {"step", c.step}, {"state", c.state}};
    io::write_text_atomic((t / "trainer_state.json").string(), j.dump(2) + "\n");
    io::write_text_atomic((t / "config.toml").string(), config_text_);
    write_checkpoint_checksums(tmp);  // last: it hashes everything above
  });
  prune_checkpoints(dir_, keep_last_);
}

bool SideRun::should_stop(int64_t step_done) const {
  return signal_.load() != 0 || (o_.stop_after >= 0 && step_done >= o_.stop_after);
}

std::string SideRun::finish() {
  sinks_.flush();
  return report::write_html_report(dir_);
}

}  // namespace temper::app
