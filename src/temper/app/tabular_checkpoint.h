// A tabular trainer's state (tabular::Snapshot: the tables as named f32 tensors, the loop's counters and RNG offset
// as JSON) as a side run's checkpoint (app/side_run.h) and back. An empty table is not written as a tensor (its
// name is listed in the state) and comes back empty.
#pragma once

#include "temper/app/side_run.h"
#include "temper/tabular/trainer.h"

namespace temper::app {

SideCheckpoint to_checkpoint(const tabular::TabularTrainer& t);
tabular::Snapshot from_checkpoint(const SideCheckpoint& c);

}  // namespace temper::app
