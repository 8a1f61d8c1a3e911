// The optimiser step shared by SFT and RL: global grad-norm clipping, then AdamW (torch semantics)
// with the LR schedule, over the model's flat parameter and gradient buffers; moments live in two
// flat buffers. A non-finite gradient norm skips the update (parameters and moments unchanged),
// counts it and lets the run go on; the step counter advances only on applied updates.
// Data-parallel: with a communicator of several ranks, step() first sums the gradients over ranks
// (one flat buffer, bucketed by the communicator), so every rank applies the same update.
#pragma once

#include <cstdint>

#include "temper/core/settings.h"
#include "temper/core/tensor.h"
#include "temper/dist/communicator.h"
#include "temper/kernels/adamw.h"
#include "temper/model/lr_schedule.h"
#include "temper/model/transformer.h"

namespace temper {

struct OptimizerConfig {
  kernels::AdamWConfig adamw;
  LrSchedule lr;
  double max_grad_norm = 1.0;  // <= 0: no clipping
};

// The optimiser's recipe keys, in [sft] and [rl] (the schedule's shape is the stage's: it needs its steps).
void visit_optimizer(KeyVisitor& v, kernels::AdamWConfig& adamw, LrSchedule& lr, double& max_grad_norm);

struct OptimizerStep {
  double grad_norm = 0;  // before clipping
  double lr = 0;
  bool skipped = false;  // non-finite gradients: no update
};

class Optimizer {
 public:
  Optimizer(Transformer& model, const OptimizerConfig& cfg);
  ~Optimizer();
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;
  OptimizerStep step();  // applies model.grads() (accumulated by the caller)
  int64_t steps_done() const { return step_; }
  int64_t skipped() const { return skipped_; }
  void skip() { ++skipped_; }  // an update the caller abandoned (non-finite loss)
  void restore(int64_t steps_done, int64_t skipped) { step_ = steps_done, skipped_ = skipped; }
  // The AdamW moments (with a device: copied back from it first). After writing them (loading a
  // checkpoint) call moments_updated() so a device gets them too.
  float* m() {
    pull_moments();
    return m_.data<float>();
  }
  float* v() {
    pull_moments();
    return v_.data<float>();
  }
  void moments_updated();
  int64_t size() const { return m_.numel(); }
  const OptimizerConfig& config() const { return cfg_; }
  void set_communicator(dist::Communicator* comm) { comm_ = comm; }
  dist::Communicator* communicator() const { return comm_; }

 private:
  void pull_moments();
  Transformer& model_;
  OptimizerConfig cfg_;
  Tensor m_, v_;
  int64_t step_ = 0, skipped_ = 0;
  dist::Communicator* comm_ = nullptr;  // null: one process
};

}  // namespace temper
