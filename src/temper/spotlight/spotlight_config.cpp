#include "temper/spotlight/spotlight_config.h"

#include "temper/core/error.h"

namespace temper::spotlight {

void SpotlightConfig::visit(KeyVisitor& v) {
  v("explorers", explorers, "explorer processes scoring candidate seeds (0: synchronous GRPO on random seeds)");
  v("max_staleness", max_staleness, "explorers compute with the trainer's weights version minus this");
  v("explorer_threads", explorer_threads, "threads of each explorer process");
  v("explorer_nice", explorer_nice, "the explorers' niceness (> 0: the trainer wins a core they share)");
  v.choice("sampler", sampler, "the explorers' sampler: sde | ode", {"sde", "ode"});
  v("barrier", barrier, "each step waits for its exploration (a deterministic schedule; tests)");
  v("barrier_timeout_s", barrier_timeout_s, "the longest a barrier waits before the run fails");
  v("kill_steps", kill_steps, "SIGKILL an explorer holding a request during these steps (tests)");
  v("preempt_every_s", preempt_every_s, "mean seconds between SIGKILLs of a random explorer (0: none)");
  v("respawn_delay_s", respawn_delay_s, "a dead explorer's replacement starts this much later (< 0: never)");
  v("replay", replay, "a run's schedule.jsonl: train on its seeds, explore nothing");
  v("min_request_s", min_request_s,
    "tests: each exploration request lasts at least this long (kills land mid-request)");
  v("time_join", time_join, "at the end, time an explorer joining with weights from memory vs from the checkpoint");
  planner.visit(v);
}

void SpotlightConfig::validate() const {
  TEMPER_CHECK(explorers >= 0 && explorers <= 64) << "flow.spotlight.explorers: expected 0..64, got " << explorers;
  TEMPER_CHECK(max_staleness >= 0 && max_staleness <= 4)
      << "flow.spotlight.max_staleness: expected 0..4 (the paper: 1), got " << max_staleness;
  TEMPER_CHECK(explorer_nice >= 0 && explorer_nice <= 19)
      << "flow.spotlight.explorer_nice: expected 0..19, got " << explorer_nice;
  TEMPER_CHECK(explorer_threads >= 1) << "flow.spotlight.explorer_threads: expected >= 1, got " << explorer_threads;
  TEMPER_CHECK(sampler == "sde" || sampler == "ode")
      << "flow.spotlight.sampler: expected \"sde\" or \"ode\", got '" << sampler << "'";
  TEMPER_CHECK(barrier_timeout_s > 0 && preempt_every_s >= 0 && min_request_s >= 0)
      << "flow.spotlight.barrier_timeout_s > 0, preempt_every_s >= 0 and min_request_s >= 0 expected";
  TEMPER_CHECK(!barrier || explorers > 0) << "flow.spotlight.barrier: needs explorers > 0";
  TEMPER_CHECK(!barrier || respawn_delay_s >= 0 || (kill_steps.empty() && preempt_every_s == 0))
      << "flow.spotlight.barrier with kills needs replacements (respawn_delay_s >= 0): the barrier would wait forever";
  for (int64_t s : kill_steps) TEMPER_CHECK(s >= 1) << "flow.spotlight.kill_steps: steps count from 1, got " << s;
  planner.validate();
}

}  // namespace temper::spotlight
