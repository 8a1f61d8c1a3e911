#include "temper/spotlight/schedule.h"

#include <fstream>

#include "temper/core/error.h"

namespace temper::spotlight {

nlohmann::json schedule_line(int64_t step, const std::vector<GroupPlan>& groups) {
  nlohmann::json g = nlohmann::json::array();
  for (const GroupPlan& p : groups)
    g.push_back({{"label", p.label},
                 {"seeds", p.seeds},
                 {"explored", p.explored},
                 {"candidates", p.candidates},
                 {"version", p.version}});
  return {{"step", step}, {"groups", g}};
}

std::map<int64_t, std::vector<GroupPlan>> read_schedule(const std::string& path) {
  std::ifstream in(path);
  TEMPER_CHECK(in) << path << ": cannot read the schedule (flow.spotlight.replay)";
  std::map<int64_t, std::vector<GroupPlan>> all;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    const nlohmann::json j = nlohmann::json::parse(line);
    std::vector<GroupPlan>& out = all[j.at("step").get<int64_t>()];
    out.clear();
    for (const auto& g : j.at("groups")) {
      GroupPlan p;
      p.label = g.at("label").get<int32_t>();
      p.seeds = g.at("seeds").get<std::vector<uint64_t>>();
      p.explored = g.at("explored").get<bool>();
      p.candidates = g.at("candidates").get<int64_t>();
      p.version = g.at("version").get<int64_t>();
      out.push_back(std::move(p));
    }
  }
  return all;
}

}  // namespace temper::spotlight
