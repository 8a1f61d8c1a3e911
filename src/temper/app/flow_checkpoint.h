// The checkpoint keys of the flow apps (flow train, flow rl, flow spotlight) in one place: an AdamW state (tensors
// "adam.m", "adam.v"; state "adam_step") and DG-RL's (flow/dg_rl.h: its tensors "disc.*", "pool.*"; state
// "disc_fits", "compute", "disc_accuracy"), put into and taken out of a side run's checkpoint (side_run.h). The
// names are those older run directories hold; a checkpoint without "compute" (temper flow spotlight's before it
// saved the counter) reads it as 0. Not here: the models' tensors (flow_setup.h), the spotlight trainer's own state.
#pragma once

#include "temper/app/side_run.h"
#include "temper/flow/dg_rl.h"
#include "temper/nn/mlp.h"

namespace temper::app {

void flow_checkpoint_put_adamw(SideCheckpoint& c, const nn::AdamW& opt);
// Throws naming the checkpoint when a key is missing or a moment's size is not the optimiser's.
void flow_checkpoint_get_adamw(const SideCheckpoint& c, nn::AdamW& opt);

// DG-RL's state besides its policy and optimiser: the head and the rwfm pool (tensors) and the counters.
void flow_checkpoint_put_dg_rl(SideCheckpoint& c, const flow::DgRl& rl);
// Throws naming the checkpoint when "disc_fits" or "disc_accuracy" is missing (a missing "compute" is 0).
void flow_checkpoint_get_dg_rl(const SideCheckpoint& c, flow::DgRl& rl);

}  // namespace temper::app
