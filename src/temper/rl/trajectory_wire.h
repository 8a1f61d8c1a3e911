// Trajectories as bytes, for the data-parallel trainer: each rank rolls out its share of the
// requests and all ranks all-gather the trajectories, so every rank holds the whole batch (group
// statistics, methods' batch-wide quantities and the metrics then equal one process's).
#pragma once

#include <string>
#include <vector>

#include "temper/rl/batch.h"

namespace temper::rl {

std::string encode_trajectories(const std::vector<Trajectory>& traj);
// Appends what `bytes` holds to `out`.
void decode_trajectories(const std::string& bytes, std::vector<Trajectory>& out);

}  // namespace temper::rl
