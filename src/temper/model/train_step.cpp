#include "temper/model/train_step.h"

#include <algorithm>
#include <cmath>

#include "temper/core/error.h"
#include "temper/core/profile.h"

namespace temper {

Trainer::Trainer(Transformer& model, const TrainConfig& cfg)
    : model_(model), cfg_(cfg), opt_(model, cfg.optimizer()) {}

StepStats Trainer::step(const int32_t* tokens, const float* loss_mask, int64_t B, int64_t T, const SoftTargets* soft) {
  TEMPER_CHECK(T >= 2) << "training needs sequences of at least 2 tokens, got " << T;
  const int64_t N = B * T;
  targets_.assign(static_cast<size_t>(N), -1);
  mask_.assign(static_cast<size_t>(N), 0.f);
  logprob_.assign(static_cast<size_t>(N), 0.f);
  entropy_.assign(static_cast<size_t>(N), 0.f);
  double count = 0;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t + 1 < T; ++t) {
      float m = loss_mask ? loss_mask[b * (T - 1) + t] : 1.f;
      targets_[static_cast<size_t>(b * T + t)] = tokens[b * T + t + 1];
      mask_[static_cast<size_t>(b * T + t)] = m;
      count += m;
    }
  opt_.zero_grad();
  // Data-parallel: this rank's contiguous block of rows; the loss normaliser (count) is the whole
  // batch's, so the gradients summed over ranks are the one-process gradient.
  dist::Communicator* comm = opt_.communicator();
  const dist::Range mine = comm ? dist::shard(B, *comm) : dist::Range{0, B};
  if (soft) soft_ce_.assign(static_cast<size_t>(N), 0.f);
  int64_t mb = cfg_.micro_batch > 0 && cfg_.micro_batch < B ? cfg_.micro_batch : B;
  for (int64_t b0 = mine.begin; b0 < mine.end; b0 += mb) {
    int64_t rows = std::min(mb, mine.end - b0);
    int64_t off = b0 * T;
    if (soft) {
      MaskedDistill loss(mask_.data() + off, count, *soft, off, soft_ce_.data() + off);
      model_.forward_backward(tokens + off, targets_.data() + off, rows, T, loss, logprob_.data() + off,
                              entropy_.data() + off);
    } else {
      MaskedCrossEntropy loss(mask_.data() + off, count);
      model_.forward_backward(tokens + off, targets_.data() + off, rows, T, loss, logprob_.data() + off,
                              entropy_.data() + off);
    }
  }
  opt_.gradients_done();  // ZeRO-2: before the loss's all-reduce (the ranks' micro-batches may differ in number)
  StepStats s;
  double total = 0, soft_total = 0;
  for (int64_t n = 0; n < N; ++n) {
    total -= static_cast<double>(mask_[n]) * logprob_[n];
    if (soft && mask_[n] != 0.f) soft_total += static_cast<double>(mask_[n]) * soft_ce_[static_cast<size_t>(n)];
  }
  if (comm && comm->size() > 1) {
    double sums[2] = {total, soft_total};
    comm->allreduce_sum(sums, 2);
    total = sums[0], soft_total = sums[1];
  }
  s.loss = count > 0 ? total / count : 0.0;
  if (soft) {
    s.soft_ce = count > 0 ? soft_total / count : 0.0;
    s.loss = soft->ce_weight * s.loss + soft->kl_weight * s.soft_ce;
  }
  s.tokens = static_cast<int64_t>(count);
  if (!std::isfinite(s.loss)) {  // the gradients are not finite either: no update
    s.skipped = true;
    opt_.skip();
    s.grad_norm = NAN;
    s.lr = cfg_.lr.at(opt_.steps_done());
    return s;
  }
  OptimizerStep o = opt_.step();
  s.grad_norm = o.grad_norm;
  s.lr = o.lr;
  s.skipped = o.skipped;
  return s;
}

}  // namespace temper
