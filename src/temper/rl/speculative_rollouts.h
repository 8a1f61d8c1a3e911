// EfficientRollout ([rl.speculative]) as the trainer runs it: the 4-bit drafter of the policy, the
// controller that switches speculation on per rollout, the drafter head's token counts, their
// checkpoint text and the step's spec_* metrics. The decoding itself is the engine's
// (rollout/engine.h); the trainer only calls begin_step / observe / metrics around its rollouts.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "temper/core/settings.h"
#include "temper/dist/communicator.h"
#include "temper/model/int4_drafter.h"
#include "temper/model/kv_pool.h"
#include "temper/model/transformer.h"
#include "temper/rl/method.h"
#include "temper/rollout/engine.h"
#include "temper/rollout/spec_control.h"

namespace temper::rl {

// Rollouts decode speculatively with a 4-bit copy of the policy (re-quantized at the start of every step,
// i.e. after every weight update; `lag` keeps older copies), switched on per rollout by the controller
// (rollout/spec_control.h).
struct SpeculativeConfig {
  rollout::SpecConfig control;
  int64_t group = 128;  // inputs per int4 scale
  int64_t lag = 0;      // drafter from `lag` updates earlier
  DraftHead head = DraftHead::bf16;
  int64_t vocab = 0;  // the head's tokens: the most frequent in earlier rollouts (0: all; Int4Drafter::set_vocab)
  int64_t gamma = 0;  // > 0: a fixed gamma (the ladder of one rung)
  void visit(KeyVisitor& v);
  void validate() const;
};

class SpeculativeRollouts {
 public:
  // Builds the drafter and the controller and hands them to `engine` (which must outlive this).
  SpeculativeRollouts(const SpeculativeConfig& cfg, Transformer& policy, KvPool& pool, rollout::RolloutEngine& engine,
                      const rollout::SamplerConfig& sampler);
  // Before the step's rollouts: the drafter from the current weights where needed, the cost model once per run.
  void begin_step(dist::Communicator* comm);
  // After one rollout run on this rank: its engine statistics and (every rank alike) its completions' tokens.
  void observe(const rollout::EngineStats& stats, const std::vector<rollout::Completion>& done);
  // After the step's rollouts: acceptance summed over ranks moves the ladder; the spec_* metrics.
  void metrics(Metrics& out, dist::Communicator* comm);
  std::string state() const;  // controller state, cost model and token counts (checkpoint text)
  void load_state(const std::string& text);

 private:
  void refresh_drafter();  // once per step at most, when speculation first needs it
  void calibrate(dist::Communicator* comm);

  SpeculativeConfig cfg_;
  Transformer& policy_;
  KvPool& pool_;
  rollout::RolloutEngine& engine_;
  rollout::SamplerConfig sampler_;
  std::unique_ptr<Int4Drafter> drafter_;
  std::unique_ptr<rollout::SpecController> spec_;
  rollout::EngineStats sum_;                  // this step's rollouts on this rank
  double vocab_tokens_ = 0, vocab_hits_ = 0;  // this step's sampled tokens, and those inside the drafter's head
  std::vector<int32_t> vocab_ids_;            // the drafter's head as ranked at the step's start (ascending)
  double requant_s_ = 0;
  bool drafter_fresh_ = false;  // re-quantized from this step's weights
};

}  // namespace temper::rl
