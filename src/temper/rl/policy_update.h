// One RL update of the policy from a scored batch (RlTrainer::update): the batch's token rows and the
// reference's log-probs for the KL term, then epochs -> mini-batches (one optimiser step each) ->
// micro-batches (PolicyLoss -> forward_backward, gradients accumulated), and the update's metrics.
// Leaves out rollouts, rewards and advantages (rl_trainer.cpp) and the loss itself (policy_loss.h).
#pragma once

#include <cstdint>

#include "temper/dist/communicator.h"
#include "temper/model/activation_store.h"
#include "temper/model/optimizer.h"
#include "temper/model/transformer.h"
#include "temper/rl/batch.h"
#include "temper/rl/method.h"
#include "temper/rl/scorer.h"

namespace temper::rl {

struct RlConfig;

// What the update works with: the trainer's settings, model, optimiser and reference pass; the store
// of the rollout's activations (null: none kept); the process group (null: one process); the step (it
// seeds the mini-batch shuffle).
struct PolicyUpdateEnv {
  const RlConfig& cfg;
  Transformer& policy;
  Optimizer& opt;
  Scorer& scorer;
  ActivationStore* store = nullptr;
  dist::Communicator* comm = nullptr;
  int64_t step = 0;
};

// Data-parallel: each rank computes reference log-probs for its block of rows and gradients for its share of
// each mini-batch's rows, scaled by the whole mini-batch's normalisers; the optimiser sums over ranks. The
// metrics are the whole batch's on every rank.
Metrics update_policy(const PolicyUpdateEnv& env, const Batch& b);

}  // namespace temper::rl
