// Fault injection for the crash and signal tests of `temper train` (tests/e2e/train_resume.sh, train_stop.sh):
//   TEMPER_FAULT_SIGNAL_IN_STEP="N:SIG[:PHASE]" sends signal SIG (15 SIGTERM, 2 SIGINT) to this process, as a spot
//     instance's SIGTERM or a Ctrl-C would, at PHASE of step N: "end" (the default: once the step is done, before
//     its evaluation and checkpoint), "rollout" (as step N's rollouts begin) or "eval" (as the evaluation at step N
//     begins); then waits until the signal thread has taken it (a signal sent from outside may come after a short
//     run has ended).
//   TEMPER_FAULT_KILL_IN_CHECKPOINT=N: SIGKILL halfway through writing checkpoint N.
#pragma once

#include <cstdint>
#include <functional>

namespace temper::app {

void fault_signal(int64_t step, const char* phase);
// The mid-write hook for checkpoint `step` (empty when no fault is asked for it).
std::function<void()> fault_kill_in_checkpoint(int64_t step);

}  // namespace temper::app
