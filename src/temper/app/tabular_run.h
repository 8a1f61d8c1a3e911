// `temper tabular train [RECIPE]`: Pareto Q-learning with reward machines (or a baseline) in a run directory
// (app/side_run.h): config.toml, metrics.jsonl + TensorBoard (hypervolume, front size, and against the exact front
// when it is computed: hv_ratio, recovered, spurious, worst), checkpoints holding the tables as tensors and the
// loop's state as JSON (a resumed run's metrics equal an uninterrupted run's, bitwise), report.html.
#pragma once

#include "temper/app/side_run.h"

namespace temper::app {

int tabular_train(const SideRunOptions& o);

}  // namespace temper::app
