// A trainer's resumable state as a checkpoint holds it, below any file format: named f32 tensors (parameters,
// optimiser moments, tables) and a JSON object (counters, RNG offsets). tabular's trainers save to it
// (tabular::Snapshot) and app's side runs write and read it (SideCheckpoint adds the step); the files themselves
// are app's (side_run.h).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

namespace temper {

struct StateSnapshot {
  std::vector<std::pair<std::string, std::vector<float>>> tensors;
  nlohmann::json state = nlohmann::json::object();
  std::string from;  // the checkpoint it was read from, for messages ("": made in memory)
  // The tensor `name`; throws naming the checkpoint, the tensor and how many tensors it has.
  const std::vector<float>& tensor(const std::string& name) const;
};

}  // namespace temper
