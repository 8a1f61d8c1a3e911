// Calls that may hang, run where they can be killed: fn(0), fn(1), ... run one after another in a forked child
// process (a copy of this one: the function reads what this process holds, nothing is serialised but its
// results), each result streamed back as it is done. An item that runs past its timeout, or that takes the child
// down (a crash, an abort), kills the child: that item fails, and a fresh child goes on with the next item. An
// exception fails its item only. The caller never waits more than timeout_s per item.
//
// The child runs on one thread: fn must not wait on locks other threads of this process may hold (it verifies
// text; logging is left out in the child), and must not touch a GPU.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace temper::reward {

struct ForkedCallsStats {
  int64_t children = 0;  // processes forked
  int64_t timeouts = 0;  // items killed at their timeout
  int64_t crashes = 0;   // items whose child died
  int64_t exceptions = 0;
};

// Results of fn(i) for i < n (nullopt: the item failed; `why` says how, when given). timeout_s <= 0: no limit.
std::vector<std::optional<std::string>> run_forked(size_t n, const std::function<std::string(size_t)>& fn,
                                                   double timeout_s, ForkedCallsStats* stats = nullptr,
                                                   std::vector<std::string>* why = nullptr);

}  // namespace temper::reward
