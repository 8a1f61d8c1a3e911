// One flow-matching training step (flow_matching.h) on a data source: batch `batch` drawn from (seed, step),
// t / eps / label dropout from their own stream, AdamW (torch.optim.AdamW) with gradient clipping. Every draw
// is a function of (seed, step), so a run resumed from a checkpoint (parameters, moments, step) continues
// bitwise as the uninterrupted run.
#pragma once

#include <cstdint>
#include <string>

#include "temper/core/settings.h"
#include "temper/flow/data_source.h"
#include "temper/flow/velocity_model.h"
#include "temper/nn/mlp.h"

namespace temper::flow {

struct FmTrainConfig {
  int64_t steps = 3000;
  int64_t batch = 256;
  double lr = 2e-3;
  std::string schedule = "constant";  // constant | cosine (to lr_min at `steps`)
  double lr_min = 0.0;
  double weight_decay = 0.0;
  double max_grad_norm = 1.0;  // <= 0: no clipping
  double p_uncond = 0.1;       // label dropout for classifier-free guidance (class-conditional data only)
  int64_t seed = 0;
  void validate() const;
  void visit(KeyVisitor& v);  // the [train] keys
};

struct FmStepStats {
  double loss = 0, grad_norm = 0, lr = 0;
};

double fm_lr(const FmTrainConfig& c, int64_t step);  // the schedule's learning rate at step (from 1)
// step counts from 1. `grad` is scratch of param_count().
FmStepStats fm_train_step(VelocityModel& m, nn::AdamW& opt, const DataSource& data, const FmTrainConfig& c,
                          int64_t step, std::vector<float>& grad);

}  // namespace temper::flow
