// Explorer processes as `temper flow spotlight` starts them (this program again: `temper flow explore --fd 3`;
// TEMPER_SPOTLIGHT_EXE overrides the program, for tests that are not `temper`), the pool's summary at the end,
// and the reconfiguration timing: an explorer joining with the weights from the trainer's memory (over its
// socket) against one that reads the run's newest checkpoint (verified) itself; each is spawn -> first pull
// (ready to accept work), the median of 3, written as metrics join_memory_s / join_checkpoint_s.
#pragma once

#include <string>
#include <vector>

#include "temper/app/flow_spotlight_setup.h"
#include "temper/app/side_run.h"
#include "temper/spotlight/trainer.h"

namespace temper::app {

std::vector<std::string> explorer_argv(int64_t threads, int64_t nice = 0);
void print_pool_summary(spotlight::SpotlightTrainer& tr);
// Spawn -> ready seconds of one explorer with the store's explorer version from memory, or (from_checkpoint)
// reading dir's newest checkpoint.
double time_join(const ExplorerSetup& es, const std::vector<std::string>& argv, const spotlight::WeightStore& store,
                 const std::string& dir, bool from_checkpoint);
void time_joins(const ExplorerSetup& es, const std::vector<std::string>& argv, const spotlight::WeightStore& store,
                SideRun& run);

}  // namespace temper::app
