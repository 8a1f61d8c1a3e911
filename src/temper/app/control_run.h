// `temper control train [RECIPE]` and `temper control eval RUN` (issue 40): meta-knowledge transfer runs in a
// side-run directory (side_run.h: fresh-directory check, --resume, config changes refused, metrics.jsonl +
// TensorBoard, checkpoints with checksums, SIGINT/SIGTERM, report.html). A checkpoint holds every parameter and
// AdamW moment, the frozen meta-knowledge (meta and transfer runs) and the environment's arrays; the tasks and the
// noise are functions of (seed, iteration), so a resumed run's metrics equal an uninterrupted run's. eval prints
// one JSON object: the deterministic policy on tasks it never trained on (final error, return, success, the
// encoder's mode ARI) with the run's env steps and steps to threshold.
#pragma once

#include <cstdint>
#include <string>

#include "temper/app/side_run.h"

namespace temper::app {

int control_train(const SideRunOptions& o);

struct ControlEvalOptions {
  std::string run;
  int64_t envs = 256;
  std::string tasks = "unseen";  // unseen | eval (the run's own evaluation set)
  std::string json_out;          // "" : stdout
  bool fallback = false;
  int threads = 0;
};
int control_eval(const ControlEvalOptions& o);

}  // namespace temper::app
