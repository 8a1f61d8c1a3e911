// Speculative decoding for one-off generation (temper generate, temper eval): a 4-bit self-drafter
// built from the model's current weights and a fixed-gamma controller, attached to an engine. The
// output distribution is the plain engine's (rollout/spec_sampling.h); greedy output is the same
// tokens. Toggle `always` speculates at every live batch; `cost` calibrates the cost model first and
// speculates only where it predicts a speed-up (small live batches on a CPU).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "temper/model/int4_drafter.h"
#include "temper/rollout/engine.h"
#include "temper/rollout/spec_control.h"

namespace temper::rollout {

class SelfSpeculation {
 public:
  // gamma in [1, 32]; `pool` is the engine's (the cost toggle times forwards on a scratch sequence in it).
  void attach(Transformer& model, KvPool& pool, RolloutEngine& engine, int64_t gamma, DraftHead head,
              SpecToggle toggle);
  bool on() const { return drafter_ != nullptr; }
  const Int4Drafter& drafter() const { return *drafter_; }
  double build_seconds() const { return build_s_; }
  // "speculative (gamma G, 4-bit drafter of M MB built in S s): A of D drafts accepted (r), T tokens per
  // policy forward" for an engine's statistics.
  std::string summary(const EngineStats& st) const;

 private:
  std::unique_ptr<Int4Drafter> drafter_;
  std::unique_ptr<SpecController> spec_;
  double build_s_ = 0;
};

}  // namespace temper::rollout
