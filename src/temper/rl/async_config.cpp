// [rl.async]'s keys, their checks and the thread split (async_config.h).
#include "temper/rl/async_config.h"

#include <algorithm>
#include <cmath>

#include "temper/core/error.h"

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
