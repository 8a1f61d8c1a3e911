// A tabular trainer's state as a side run's checkpoint and back (see tabular_checkpoint.h).
#include "temper/app/tabular_checkpoint.h"

#include "temper/core/error.h"

namespace temper::app {

SideCheckpoint to_checkpoint(const tabular::TabularTrainer& t) {
  tabular::Snapshot s = t.save();
  SideCheckpoint c;
  c.step = t.steps();
  c.state = std::move(s.state);
  // Every tensor's name goes in the state; an empty one (an ND table with no vector yet) is not written as a tensor
  // and comes back empty.
  for (auto& [name, v] : s.tensors) {
    c.state["tensors"].push_back(name);
    if (!v.empty()) c.tensors.push_back({name, std::move(v)});
  }
  return c;
}

tabular::Snapshot from_checkpoint(const SideCheckpoint& c) {
  tabular::Snapshot s = c;  // the tensors, the state and where it was read from
  TEMPER_CHECK(c.state.contains("tensors"))
      << c.from << ": not a tabular run's checkpoint (no \"tensors\" in its state)";
  for (const std::string& name : c.state["tensors"].get<std::vector<std::string>>()) {
    bool found = false;
    for (const auto& [n, v] : s.tensors) found = found || n == name;
    if (!found) s.tensors.push_back({name, {}});
  }
  return s;
}

}  // namespace temper::app
