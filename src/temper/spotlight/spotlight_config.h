// The recipe section [flow.spotlight] (spec methods-other section 3; issue 39 items 2-3): explorer processes that
// score candidate noise seeds on the previous weights, the planner's sizes, and the preemption schedules the
// tests and the evidence inject. The trainer's group size G is the planner's `group`.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "temper/core/settings.h"
#include "temper/spotlight/planner.h"

namespace temper::spotlight {

struct SpotlightConfig {
  int64_t explorers = 1;         // explorer processes (0: synchronous GRPO on random seeds)
  int64_t max_staleness = 1;     // explorers compute with the trainer's version minus this
  int64_t explorer_threads = 1;  // threads of each explorer process
  int64_t explorer_nice = 0;     // the explorers' niceness (> 0: the trainer, on the critical path, wins a shared core)
  std::string sampler = "sde";   // the explorers' sampler: sde (the trainer's paths) | ode (the seed's ODE map)
  bool barrier = false;          // each step waits for its exploration (a deterministic schedule: tests)
  double barrier_timeout_s = 120;
  std::vector<int64_t> kill_steps;  // during these steps, SIGKILL an explorer that holds a request
  double preempt_every_s = 0;       // mean seconds between SIGKILLs of a random explorer (0: none)
  double respawn_delay_s = 0;       // a dead explorer's replacement starts this much later (< 0: never)
  std::string replay;               // a schedule.jsonl: use its seeds, explore nothing
  double min_request_s = 0;         // tests: each exploration request lasts at least this long
  bool time_join = false;           // at the end: time an explorer joining from memory vs from the checkpoint
  PlannerConfig planner;
  void validate() const;
  void visit(KeyVisitor& v);
};

}  // namespace temper::spotlight
