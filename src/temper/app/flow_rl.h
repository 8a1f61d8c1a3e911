// `temper flow rl [RECIPE]`: discriminator-guided RL (flow/dg_rl.h) from a base model trained by `temper flow
// train`: rl.base names that run directory; its recorded [data], [features] and [model] are used and its newest
// checkpoint is p_0. The run directory holds the policy, AdamW's moments, the base, the discriminator and (rwfm)
// the weighted pool, so a resume continues bitwise. Metrics: each step's reward, KL to the base, objective and
// compute; evaluations (step 0 = the base) as temper flow train's, plus on 2-D data the correlation of the
// discriminator's logit with the true log ratio log p_data / p_0 (p_0 from the base's exact ODE density).
#pragma once

#include "temper/app/side_run.h"

namespace temper::app {

int run_flow_rl(const SideRunOptions& o);

}  // namespace temper::app
