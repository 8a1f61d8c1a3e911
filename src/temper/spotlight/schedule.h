// What a Spotlight step trains on: each group's class label and its G seeds (chosen by exploration or, without
// it, the group's first G candidates), recorded one JSON line per step (RUN/schedule.jsonl) so a run can be
// replayed: the weights are a function of the initial weights and this schedule alone.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace temper::spotlight {

struct GroupPlan {
  int32_t label = 0;
  std::vector<uint64_t> seeds;  // G seed ids
  bool explored = false;        // chosen from explored candidates (false: the first G candidates)
  int64_t candidates = 0;       // candidates scored
  int64_t version = -1;         // the weights' version the candidates were scored with (-1: none)
  double selected_std = 0;      // the kept seeds' reward spread under that version
  double random_std = 0;        // the first G candidates' spread under it (what random seeds would give)
  double cost = 0;              // explorer cost of the candidates (seconds or seeds: PlannerConfig::cost)
};

nlohmann::json schedule_line(int64_t step, const std::vector<GroupPlan>& groups);
// Every step's groups in a schedule.jsonl (throws naming the file when it cannot be read).
std::map<int64_t, std::vector<GroupPlan>> read_schedule(const std::string& path);

}  // namespace temper::spotlight
