// The run directory of the systems beyond language models (`temper flow ...`, `temper control ...`,
// `temper tabular ...`), with the promises of `temper train`'s (run_dir.h, checkpoint.h): a new run refuses a
// directory that holds one; --resume DIR continues from the newest verified checkpoint (or starts over a run
// that stopped before its first); the resolved recipe is written as config.toml and a resume that changes it
// is refused unless --allow-changes (listed in history.jsonl); DIR/.lock keeps a second process out;
// metrics.jsonl and TensorBoard events are truncated to the checkpoint's step on resume, so a resumed run's
// files equal an uninterrupted run's; checkpoints/step-N (trainer_state.safetensors: the caller's named f32
// tensors; trainer_state.json: its state) are written atomically with checksums.sha256 and keep-last pruning;
// SIGINT/SIGTERM are taken on a dedicated thread (started in the constructor, before any other thread) and
// turn into should_stop(); report.html at the end shows the metrics and the PNGs under DIR/images/.
// The recipe's [run] section: out (the directory when --out is not given) and keep_last.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "temper/app/recipe.h"
#include "temper/app/run_dir.h"
#include "temper/core/state_snapshot.h"
#include "temper/core/stop_signals.h"
#include "temper/report/metrics_sink.h"

namespace temper::app {

class RunLock;

struct SideRunOptions {           // the command line (cli_common.h: add_side_run_options)
  std::string recipe;             // TOML file; "" : the command's built-in recipe (or, with --resume, the run's)
  std::vector<std::string> sets;  // --set key=value
  std::string out, resume;        // --out DIR (a new run) | --resume DIR
  bool allow_changes = false, fallback = false;
  int64_t stop_after = -1;  // checkpoint and exit after this step
  int threads = 0;          // 0: all cores
};

// tensors: parameters, optimiser moments, ...; state: counters, RNG offsets, ...; from: the checkpoint directory it
// was read from ("": new).
struct SideCheckpoint : StateSnapshot {
  int64_t step = 0;
};

// The newest verified checkpoint of another run directory (a base model, a run to sample from); throws naming the
// run when it has none. command: the reader, named in messages. fallback: a damaged newest one gives way to the
// previous good one (choose_resume_checkpoint).
SideCheckpoint read_run_checkpoint(const std::string& run, const std::string& command, bool fallback = false);

class SideRun {
 public:
  // command: "temper flow train" (for messages and history). default_recipe: the TOML used with neither a recipe
  // nor --resume. read_config: reads every section the command uses into the caller's structs (its lambda
  // captures them); called on the recipe, and on a resumed run's recorded config to compare the two (then on
  // the recipe again, so the structs end with the recipe's values). Throws on a bad recipe: nothing is written.
  SideRun(std::string command, SideRunOptions o, const std::string& default_recipe,
          std::function<void(Recipe&)> read_config);
  ~SideRun();
  SideRun(const SideRun&) = delete;
  SideRun& operator=(const SideRun&) = delete;

  // Checks the directory (a new run: fresh; --resume: a run there, its checkpoint verified, config changes
  // refused unless allowed) and reads the checkpoint to resume from. Writes nothing.
  std::optional<SideCheckpoint> open();
  // Creates (or clears, for a start-over) and locks the directory; history.jsonl, config.toml, the sinks.
  void start();

  const std::string& dir() const { return dir_; }
  const Recipe& recipe() const { return recipe_; }
  report::MetricsSink& metrics() { return sinks_; }
  // checkpoints/step-<c.step>, then keep-last pruning (the recipe's run.keep_last; flushes the metrics first).
  void save(const SideCheckpoint& c);
  // A signal arrived, or step_done reached --stop-after.
  bool should_stop(int64_t step_done) const;
  int signal() const { return signal_.load(); }
  // Flushes the metrics and writes report.html; returns its path.
  std::string finish();

 private:
  void check_changes();
  std::string command_;
  SideRunOptions o_;
  std::function<void(Recipe&)> read_config_;
  Recipe recipe_;
  std::string dir_, resume_from_, config_text_;
  int64_t keep_last_ = 3, resumed_step_ = 0;
  RunDirKind kind_ = RunDirKind::fresh;
  std::vector<ConfigChange> changes_;
  StopSignals signals_;
  std::atomic<int> signal_{0};
  std::unique_ptr<RunLock> lock_;
  report::MetricsFanout sinks_;
};

}  // namespace temper::app
