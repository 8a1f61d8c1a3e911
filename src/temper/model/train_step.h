// The supervised training step: masked next-token cross-entropy over a batch split into
// micro-batches with gradient accumulation (the loss is normalised by the whole batch's token
// count, so accumulation equals one big batch), global grad-norm clipping, AdamW with the LR
// schedule. AdamW moments live in two flat buffers beside the model's params and grads.
// Data-parallel (optimizer().set_communicator): every rank is given the whole batch and trains on its
// block of rows (dist::shard); gradients and loss sums are summed over ranks.
#pragma once

#include <cstdint>
#include <vector>

#include "temper/core/tensor.h"
#include "temper/kernels/adamw.h"
#include "temper/kernels/classifier.h"
#include "temper/model/lr_schedule.h"
#include "temper/model/optimizer.h"
#include "temper/model/transformer.h"

namespace temper {

// L = -sum_n mask[n] * logprob[n] / count: the masked mean next-token cross-entropy.
class MaskedCrossEntropy : public kernels::ClassifierLoss {
 public:
  MaskedCrossEntropy(const float* mask, double count) : mask_(mask), inv_(count > 0 ? 1.0 / count : 0.0) {}
  void coefs(int64_t n, float, float, float* g_lp, float* g_ent) const override {
    *g_lp = static_cast<float>(-mask_[n] * inv_);
    *g_ent = 0.f;
  }

 private:
  const float* mask_;
  double inv_;
};

// Soft targets for logit distillation, one entry per position n = b*T + t (predicting token t+1): the
// teacher's top-K ids and probabilities. The loss becomes ce_weight * CE(hard tokens) + kl_weight *
// CE(teacher's top-K || student), both masked means; the second is forward KL(teacher || student) up to
// the teacher's (constant) entropy.
struct SoftTargets {
  int64_t K = 0;
  const int32_t* ids = nullptr;  // [B*T, K]
  const float* probs = nullptr;  // [B*T, K]
  double kl_weight = 1.0, ce_weight = 0.0;
};

// The masked loss with soft targets (the cross-entropies per row are kept for the step's statistics).
class MaskedDistill : public kernels::ClassifierLoss {
 public:
  MaskedDistill(const float* mask, double count, const SoftTargets& st, int64_t row0, float* soft_ce)
      : mask_(mask), inv_(count > 0 ? 1.0 / count : 0.0), st_(st), row0_(row0), soft_ce_(soft_ce) {}
  void coefs(int64_t n, float, float, float* g_lp, float* g_ent) const override {
    *g_lp = static_cast<float>(-st_.ce_weight * mask_[n] * inv_);
    *g_ent = 0.f;
  }
  bool soft_target(int64_t n, kernels::SoftTarget* out) const override {
    if (mask_[n] == 0.f) return false;
    const int64_t r = row0_ + n;
    out->K = st_.K, out->ids = st_.ids + r * st_.K, out->probs = st_.probs + r * st_.K;
    out->coef = static_cast<float>(st_.kl_weight * mask_[n] * inv_);
    return true;
  }
  void soft_observed(int64_t n, float ce) const override { soft_ce_[n] = ce; }

 private:
  const float* mask_;
  double inv_;
  const SoftTargets& st_;
  int64_t row0_;
  float* soft_ce_;
};

struct TrainConfig {
  kernels::AdamWConfig adamw;
  LrSchedule lr;
  double max_grad_norm = 1.0;  // <= 0: no clipping
  int64_t micro_batch = 0;     // rows per micro-batch; 0 = whole batch
  OptimizerConfig optimizer() const { return {adamw, lr, max_grad_norm}; }
};

struct StepStats {
  double loss = 0;       // masked mean cross-entropy before the update (with soft targets: the weighted sum)
  double soft_ce = 0;    // with soft targets: the masked mean cross-entropy against the teacher's top-K
  double grad_norm = 0;  // before clipping
  double lr = 0;
  int64_t tokens = 0;    // tokens with mask 1
  bool skipped = false;  // non-finite loss or gradients: no update (parameters unchanged)
};

class Trainer {
 public:
  Trainer(Transformer& model, const TrainConfig& cfg);
  // tokens [B, T]; loss_mask [B, T-1]: position t predicts tokens[b, t+1] (1 = counts).
  StepStats step(const int32_t* tokens, const float* loss_mask, int64_t B, int64_t T, const SoftTargets* soft = nullptr);
  int64_t steps_done() const { return opt_.steps_done(); }
  int64_t skipped() const { return opt_.skipped(); }
  float* adam_m() { return opt_.m(); }
  float* adam_v() { return opt_.v(); }
  Optimizer& optimizer() { return opt_; }

 private:
  Transformer& model_;
  TrainConfig cfg_;
  Optimizer opt_;
  std::vector<int32_t> targets_;
  std::vector<float> mask_, logprob_, entropy_, soft_ce_;
};

}  // namespace temper
