// The rollout's kept activations for the update (rl.reuse_activations): owns the ActivationStore the
// engine writes into, sizes it once from the memory budget, resets it each step and decides which of
// this rank's requests may keep activations (their worst case must fit). Which rows the update then
// takes from it is reused_activations.h's; the store's layout is model/activation_store.h's.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "temper/dist/communicator.h"
#include "temper/model/activation_store.h"
#include "temper/model/transformer.h"
#include "temper/rollout/engine.h"

namespace temper::rl {

class KeptActivations {
 public:
  // budget_mb: memory for the kept activations (0: a quarter of the machine's physical memory, shared by the
  // processes of one host). Hands the store to `engine`.
  KeptActivations(Transformer& policy, rollout::RolloutEngine& engine, int64_t budget_mb);
  // Before the step's rollouts: the store empty, holding activations of the current weights.
  void begin_step(const dist::Communicator* comm);
  // Marks which of `mine` (this rank's requests) keep activations while the worst-case estimate fits;
  // draft_factor: slots a completion token may take (speculation's rejected drafts take slots too).
  void plan(std::vector<rollout::RolloutRequest>& reqs, const std::vector<int64_t>& mine, int64_t draft_factor);
  ActivationStore& store() { return store_; }

 private:
  Transformer& policy_;
  ActivationStore store_;
  int64_t budget_mb_ = 0;
  int64_t planned_ = 0;  // slots this step's requests may fill
  int64_t slots_ = -1;   // its capacity (-1: not sized yet)
};

}  // namespace temper::rl
