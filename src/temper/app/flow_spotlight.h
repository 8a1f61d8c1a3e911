// `temper flow spotlight [RECIPE]` (issue 39 items 2-3; spec methods-other section 3): DG-RL's GRPO (as `temper
// flow rl`, from the base run rl.base) whose groups' noise seeds are chosen by explorer processes scoring
// candidates on the previous weights ([flow.spotlight]; spotlight/trainer.h). explorers = 0 is the synchronous
// baseline on random seeds. The run directory holds what `temper flow rl`'s does plus the weight versions the
// explorers use, the bandit and the next step's committed results (a resume continues the schedule), and
// schedule.jsonl (each step's groups: label and seeds; flow.spotlight.replay trains on it again). Metrics: the
// step's reward, KL, group spread fresh and under the explorers' weights (selected vs random seeds), version lag,
// explorer seconds, re-queued / dropped / expired / late requests, explorer deaths, join time; wall_s (training
// time so far, evaluations excluded) beside each evaluation's FD.
// `temper flow explore --fd N`: an explorer process (started by the trainer, not by hand).
#pragma once

#include "temper/app/side_run.h"

namespace temper::app {

int run_flow_spotlight(const SideRunOptions& o);
int run_flow_explore(int fd, int threads, int nice);

}  // namespace temper::app
