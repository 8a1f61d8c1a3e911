#include "temper/flow/fm_train.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "temper/core/error.h"
#include "temper/core/rng.h"
#include "temper/flow/flow_matching.h"

namespace temper::flow {

void FmTrainConfig::visit(KeyVisitor& v) {
  v("steps", steps, "flow-matching steps");
  v("batch", batch, "samples per step");
  v("lr", lr, "AdamW learning rate");
  v.choice("schedule", schedule, "constant, or cosine from lr to lr_min over the steps", {"constant", "cosine"});
  v("lr_min", lr_min, "the cosine schedule's last learning rate");
  v("weight_decay", weight_decay, "AdamW weight decay");
  v("max_grad_norm", max_grad_norm, "gradient clipping (<= 0: none)");
  v("p_uncond", p_uncond, "label dropout for classifier-free guidance");
  v("seed", seed, "the initialisation's and the batches' draws");
}

void FmTrainConfig::validate() const {
  TEMPER_CHECK(steps >= 0) << "train.steps: expected >= 0, got " << steps;
  TEMPER_CHECK(batch >= 1) << "train.batch: expected >= 1, got " << batch;
  TEMPER_CHECK(lr > 0) << "train.lr: expected > 0, got " << lr;
  TEMPER_CHECK(schedule == "constant" || schedule == "cosine")
      << "train.schedule: expected \"constant\" or \"cosine\", got '" << schedule << "'";
  TEMPER_CHECK(lr_min >= 0 && lr_min <= lr) << "train.lr_min: expected in [0, lr = " << lr << "], got " << lr_min;
  TEMPER_CHECK(weight_decay >= 0) << "train.weight_decay: expected >= 0, got " << weight_decay;
  TEMPER_CHECK(p_uncond >= 0 && p_uncond < 1) << "train.p_uncond: expected in [0, 1), got " << p_uncond;
}

double fm_lr(const FmTrainConfig& c, int64_t step) {
  if (c.schedule != "cosine" || c.steps <= 1) return c.lr;
  const double f = static_cast<double>(std::min(step - 1, c.steps - 1)) / static_cast<double>(c.steps - 1);
  return c.lr_min + 0.5 * (c.lr - c.lr_min) * (1 + std::cos(std::numbers::pi * f));
}

FmStepStats fm_train_step(VelocityModel& m, nn::AdamW& opt, const DataSource& data, const FmTrainConfig& c,
                          int64_t step, std::vector<float>& grad) {
  const uint64_t seed = mix_seed(static_cast<uint64_t>(c.seed), static_cast<uint64_t>(step));
  std::vector<float> x;
  std::vector<int32_t> y;
  data.sample(c.batch, mix_seed(seed, 1), x, y);
  const double p_uncond = data.classes() > 1 ? c.p_uncond : 0.0;
  const FmDraw d = fm_draw(c.batch, m.dim(), y.data(), m.classes(), p_uncond, mix_seed(seed, 2));
  FmBatch b;
  b.B = c.batch, b.x0 = x.data(), b.y = d.y.data(), b.t = d.t.data(), b.eps = d.eps.data();
  grad.assign(static_cast<size_t>(m.param_count()), 0.f);
  FmStepStats st;
  st.loss = fm_loss_grad(m, b, grad.data());
  opt.cfg.weight_decay = static_cast<float>(c.weight_decay);
  st.lr = fm_lr(c, step);
  st.grad_norm = opt.update(m.params().data(), grad.data(), static_cast<float>(st.lr), c.max_grad_norm);
  return st;
}

}  // namespace temper::flow
