// Which enabled methods [rl.async] runs, checked when the recipe is read (as check_method_conflicts): every
// method's hooks run on the trainer's thread and read stale samples through the staleness-corrected loss, except a
// rollout hook, which would run on the explorer's thread against the snapshot while the method's other hooks run
// on the trainer's (DRE online, GraphPO step-wise with reallocation: refused here; a hook that only stops
// sequences is refused at the first step). docs/METHODS.md "Asynchronous RL" says why each one works off-policy.
#pragma once

#include <vector>

#include "temper/rl/method_spec.h"

namespace temper::rl {

void check_async_methods(const std::vector<EnabledMethod>& methods);

}  // namespace temper::rl
