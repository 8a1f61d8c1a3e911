// The recipe of `temper control ...` runs (issue 40, meta-knowledge transfer): [control] (the stage, the body,
// the run's size and evaluation), [control.task], [control.ppo] and [control.hierarchy] into
// control::ControlConfig, plus the run-level keys (meta_run: a transfer's meta run directory; checkpoint_every).
// A transfer takes the meta-side hierarchy (context, latent, encoder_hidden, max_modes, new_mode_distance) and the
// high level's hidden sizes from its meta run, not from its own recipe.
#pragma once

#include <cstdint>
#include <string>

#include "temper/app/recipe.h"
#include "temper/control/control_config.h"

namespace temper::app {

extern const char* const kControlDefaultRecipe;

struct ControlRunConfig {
  control::ControlConfig control;
  std::string meta_run;           // transfer: the meta run directory (its newest checkpoint)
  int64_t checkpoint_every = 25;  // iterations
};

// Resets c and reads every control section of the recipe into it.
void read_control_config(Recipe& r, ControlRunConfig& c);

// The meta-side hierarchy keys and the high level's hidden sizes, as a meta run's recipe gives them.
void read_meta_hierarchy(Recipe& r, control::HierarchySpec& h, std::vector<int64_t>& high_hidden);

}  // namespace temper::app
