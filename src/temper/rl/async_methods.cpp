// check_async_methods (async_methods.h).
#include "temper/rl/async_methods.h"

#include <string>

#include "temper/core/error.h"

namespace temper::rl {

void check_async_methods(const std::vector<EnabledMethod>& methods) {
  for (const EnabledMethod& m : methods) {
    const MethodEffects e = m.setup->effects();
    const std::string detail = e.fork_detail.empty() ? e.detail : e.fork_detail;
    TEMPER_CHECK(!e.forks_rollouts)
        << "[" << m.spec->section << "]" << (detail.empty() ? "" : " with " + detail)
        << " cannot run with [rl.async]: its rollout hook steers decoding on the explorer's thread (stale weights) "
           "while its other hooks run on the trainer's; use rl.dre.mode = \"offline\" / rl.graphpo.expansion = "
           "\"after\", or rl.async.max_staleness = 0";
  }
}

}  // namespace temper::rl
