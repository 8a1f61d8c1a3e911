// `temper bench rollout --speculative`: the rollout engine with and without speculative decoding (EfficientRollout:
// the model's 4-bit drafter, fixed gamma) at each batch size, same prompts, one process. One JSON line per batch
// size, then a summary line.
#pragma once

#include "temper/app/bench_rollout.h"

namespace temper::app {

// Each line: decode tokens/s of both, the measured speed-up, acceptance rate, mean accepted length, and the
// start-up cost model's predicted speed-up and on/off decision at that batch (so the toggle can be checked against
// what was measured); the drafter's size and build time. Prompts: a few natural-language texts through the model's
// tokenizer (random tokens without one).
int bench_speculative(const BenchRolloutOptions& o);

}  // namespace temper::app
