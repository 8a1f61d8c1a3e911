// `temper train [RECIPE] [--set k=v]... [--out DIR] [--resume DIR]`: the run loop. Reads the recipe
// (built-in quickstart when none), builds the model (a preset from scratch or a model path), the
// task, SFT then RL, evaluates on held-out problems, writes metrics.jsonl / TensorBoard events /
// samples.jsonl / checkpoints / report.html into the run directory; SIGTERM or SIGINT finishes the
// current step, writes a checkpoint and exits 0; --resume continues bitwise identically.
#pragma once

#include <string>
#include <vector>

namespace temper::app {

struct TrainOptions {
  std::string recipe;             // empty: the built-in quickstart
  std::vector<std::string> sets;  // key=value overrides
  std::string out;                // run directory (default: run.out of the recipe)
  std::string resume;             // a run directory to continue
  bool allow_changes = false;     // --resume with --set / a recipe / --device: apply them (recorded in history.jsonl)
  bool fallback = false;          // --resume: when the newest checkpoint fails its checksums, take the previous good one
  int threads = 0;
  std::string device;  // non-empty: model.device (cpu, cuda, cuda:N)
  int64_t stop_after = 0;  // > 0: checkpoint and exit 0 after this global step, as on SIGTERM
  bool list_keys = false;  // print every recipe key (run_config.h) and exit
  std::string connect;     // HOST:PORT: an [rl.async] explorer joining a trainer over TCP (rl.async.explorer_listen)
  int explorer_fd = -1;    // >= 0: an [rl.async] explorer process serving its trainer on this socket (--fd, hidden)
};

int train(const TrainOptions& o);

}  // namespace temper::app
