// [rl.async]'s keys, their checks and the thread split (async_config.h).
#include "temper/rl/async_config.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "temper/core/error.h"
#include "temper/spotlight/wire.h"

namespace temper::rl {

void AsyncConfig::visit(KeyVisitor& v) {
  v("max_staleness", max_staleness,
    "batch k is sampled with the weights after update k - max_staleness by an explorer thread while the trainer "
    "updates (0: the synchronous loop, bitwise)");
  v("tis_cap", tis_cap,
    "truncation C of the behaviour importance weight min(pi_prox / pi_behaviour, C) (TIS; verl and ms-swift use 2)");
  v("explorer_threads", explorer_threads,
    "threads of the explorer's rollouts while the trainer computes (all while the trainer waits; 0: half of the run's "
    "threads)");
  v("trainer_threads", trainer_threads,
    "threads of the trainer's step while the explorer runs (all while the explorer has no job; 0: the rest, at least "
    "1)");
  v("explorer_ranks", explorer_ranks,
    "under mpirun: the last N ranks explore, the rest train (0: an explorer thread in one process)");
  v("explorer_processes", explorer_processes,
    "one process: N explorer processes roll out blocks of each batch from a pull queue; a killed one is replaced and "
    "its block handed to another (0: the explorer thread)");
  v("explorer_listen", explorer_listen,
    "HOST:PORT: explorers on other machines join over TCP (temper train --connect HOST:PORT; TEMPER_EXPLORER_TOKEN "
    "required beyond loopback); \"\": none");
  v("request_prompts", request_prompts,
    "explorer processes: prompts per block (a pull; more: larger decode batches, more work lost to a kill)");
  v("respawn_delay_s", respawn_delay_s,
    "explorer processes: a dead one's replacement starts this much later (< 0: never)");
  v("preempt_every_s", preempt_every_s, "explorer processes: mean seconds between SIGKILLs of a random one (0: none)");
  v("kill_steps", kill_steps,
    "explorer processes: SIGKILL one holding a block of these RL steps' batches (the first RL step is 1; tests)");
  v("min_request_s", min_request_s,
    "explorer processes: each block lasts at least this long (tests: kills land mid-block)");
}

void AsyncConfig::validate() const {
  TEMPER_CHECK(max_staleness >= 0 && max_staleness <= 8)
      << "rl.async.max_staleness = " << max_staleness
      << ": expected 0 (synchronous) to 8 (one explorer: more staleness only adds lag, not overlap)";
  TEMPER_CHECK(std::isfinite(tis_cap) && tis_cap >= 1)
      << "rl.async.tis_cap = " << tis_cap << ": expected a finite number >= 1 (the cap of pi_prox / pi_behaviour)";
  TEMPER_CHECK(explorer_threads >= 0 && explorer_threads <= 4096)
      << "rl.async.explorer_threads = " << explorer_threads << ": expected 0 (half of the threads) to 4096";
  TEMPER_CHECK(trainer_threads >= 0 && trainer_threads <= 4096)
      << "rl.async.trainer_threads = " << trainer_threads << ": expected 0 (the rest) to 4096";
  TEMPER_CHECK(explorer_ranks >= 0 && explorer_ranks <= 4096)
      << "rl.async.explorer_ranks = " << explorer_ranks << ": expected 0 (an explorer thread) to 4096 ranks";
  TEMPER_CHECK(explorer_processes >= 0 && explorer_processes <= 64)
      << "rl.async.explorer_processes = " << explorer_processes << ": expected 0 (an explorer thread) to 64";
  TEMPER_CHECK(explorer_processes == 0 || explorer_ranks == 0)
      << "rl.async: explorer_processes = " << explorer_processes << " and explorer_ranks = " << explorer_ranks
      << ": choose one (processes beside one trainer process, or ranks under mpirun)";
  if (!explorer_listen.empty()) {
    const auto [host, port] = spotlight::split_address(explorer_listen, "rl.async.explorer_listen");
    const char* token = std::getenv("TEMPER_EXPLORER_TOKEN");
    TEMPER_CHECK(spotlight::is_loopback(host) || (token && *token))
        << "rl.async.explorer_listen = \"" << explorer_listen << "\": beyond loopback, explorers must present a token: "
        << "set TEMPER_EXPLORER_TOKEN (the same on the trainer and on each explorer's machine); whoever joins is sent "
        << "the recipe and the weights";
    TEMPER_CHECK(explorer_ranks == 0) << "rl.async: explorer_listen and explorer_ranks: choose one";
  }
  TEMPER_CHECK(request_prompts >= 1) << "rl.async.request_prompts = " << request_prompts << ": expected >= 1";
  TEMPER_CHECK(std::isfinite(respawn_delay_s) && std::isfinite(preempt_every_s) && preempt_every_s >= 0)
      << "rl.async.respawn_delay_s and preempt_every_s: finite numbers expected, preempt_every_s >= 0";
  TEMPER_CHECK(std::isfinite(min_request_s) && min_request_s >= 0)
      << "rl.async.min_request_s = " << min_request_s << ": expected a finite number >= 0";
  TEMPER_CHECK(explorer_processes > 0 || !explorer_listen.empty() ||
               (kill_steps.empty() && preempt_every_s == 0 && min_request_s == 0))
      << "rl.async.kill_steps, preempt_every_s and min_request_s are about explorer processes: set "
         "rl.async.explorer_processes (or explorer_listen)";
  TEMPER_CHECK(respawn_delay_s >= 0 || (kill_steps.empty() && preempt_every_s == 0))
      << "rl.async: kills without replacements (respawn_delay_s < 0) would leave no explorer to finish the batch";
  for (int64_t s : kill_steps) TEMPER_CHECK(s >= 1) << "rl.async.kill_steps: steps count from 1, got " << s;
}

int AsyncConfig::explorer_share(int threads) const {
  if (explorer_threads > 0) return static_cast<int>(explorer_threads);
  return std::max(1, threads / 2);
}

int AsyncConfig::trainer_share(int threads) const {
  if (trainer_threads > 0) return static_cast<int>(trainer_threads);
  return std::max(1, threads - explorer_share(threads));
}

}  // namespace temper::rl
