// A run that is more than a fixed list of requests: requests that arrive while it runs (a server),
// sequences whose turn ends and that go on after an environment answers (multi-turn rollouts), and a
// word when a sequence is final. RolloutEngine::run(requests, hook, driver) asks the driver at every
// step; without one a run is the plain batch call.
//
// A turn ends where a sequence would finish (a stop id or string, a hook's stop, the turn's token
// cap). The driver may keep it: the sequence is parked with its KV cache held (no re-prefill) and
// leaves the batch, the other sequences go on decoding. When the driver hands back a Continuation,
// its tokens are appended to the completion (recorded, not sampled: Completion::appended) and
// prefilled in one step after the turn's last token, and sampling goes on from there. The request's
// max_new caps the whole completion, appended tokens included; when the cap or the context is
// reached the sequence finishes with `length`. A pool too full to resume a parked sequence frees the
// KV of other waiting ones, parked or continued behind it (recomputed when they run again), as
// recompute preemption does.
#pragma once

#include <cstdint>
#include <vector>

#include "temper/rollout/engine.h"

namespace temper::rollout {

struct Continuation {
  int64_t request = 0, member = 0;  // the parked completion's
  bool finish = false;              // end it instead (its finish reason stays the turn's)
  std::vector<int32_t> append;      // tokens appended before sampling goes on
  int64_t turn_max_new = 0;         // > 0: the next turn ends (reason length) after this many generated tokens
                                    // (0: the request's turn_max_new)
};

class RunDriver {
 public:
  virtual ~RunDriver() = default;
  // Requests that arrived since the last call, appended to `add`; each gets the next request index
  // (after the run's initial requests, in arrival order).
  virtual void incoming(std::vector<RolloutRequest>& /*add*/) {}
  // The turn of `c` ended with `why`; `can_continue` is false when the completion's cap or the context
  // is reached. Return true to park it until a Continuation for it arrives; false: it finishes.
  virtual bool turn_ended(const Completion& /*c*/, FinishReason /*why*/, bool /*can_continue*/) { return false; }
  // Continuations ready now, appended to `out`. wait = true when the engine has nothing else to do:
  // block until there is a continuation or an incoming request, or the driver is closed.
  virtual void poll(std::vector<Continuation>& /*out*/, bool /*wait*/) {}
  // The run ends once nothing is live, queued or parked and this is true (a server: at shutdown).
  virtual bool closed() const { return true; }
  // `c` is final (finished, not parked). A long-lived driver may move its vectors out: the run keeps
  // only an empty shell of it.
  virtual void finished(Completion& /*c*/) {}
};

}  // namespace temper::rollout
