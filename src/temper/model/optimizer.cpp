#include "temper/model/optimizer.h"

#include <cmath>

#include "temper/core/log.h"
#include "temper/core/profile.h"

namespace temper {

void visit_optimizer(KeyVisitor& v, kernels::AdamWConfig& adamw, LrSchedule& lr, double& max_grad_norm) {
  v("lr", lr.peak, "peak learning rate");
  v("warmup", lr.warmup_steps, "linear warm-up steps");
  v("min_lr_ratio", lr.min_ratio, "cosine: the final learning rate as a share of the peak");
  v("weight_decay", adamw.weight_decay, "AdamW's decoupled weight decay");
  v("beta1", adamw.beta1, "AdamW beta1");
  v("beta2", adamw.beta2, "AdamW beta2");
  v("adam_eps", adamw.eps, "AdamW epsilon");
  v("max_grad_norm", max_grad_norm, "clip the gradient's global norm to this (<= 0: no clipping)");
}

Optimizer::Optimizer(Transformer& model, const OptimizerConfig& cfg)
    : model_(model), cfg_(cfg), m_(Tensor::zeros({model.flat_size()})), v_(Tensor::zeros({model.flat_size()})) {}

OptimizerStep Optimizer::step() {
  TEMPER_PROFILE("optimizer");
  OptimizerStep s;
  if (DeviceModel* d = model_.device()) {  // the gradients, weights and moments live on the device
    d->bind_moments(this, m_.data<float>(), v_.data<float>());
    s.lr = cfg_.lr.at(step_);
    s.grad_norm = d->optimizer_step(comm_, cfg_.adamw, static_cast<float>(s.lr), step_ + 1, cfg_.max_grad_norm);
    if (!std::isfinite(s.grad_norm)) {
      s.skipped = true;
      ++skipped_;
      return s;
    }
    ++step_;
    model_.device_params_changed();
    return s;
  }
  if (comm_ && comm_->size() > 1) comm_->allreduce_sum(model_.grads(), model_.flat_size());
  s.grad_norm = kernels::clip_grad_norm(model_.grads(), model_.flat_size(), cfg_.max_grad_norm);
  s.lr = cfg_.lr.at(step_);
  if (!std::isfinite(s.grad_norm)) {
    s.skipped = true;
    ++skipped_;
    return s;
  }
  ++step_;
  kernels::adamw_step(model_.params(), model_.grads(), m_.data<float>(), v_.data<float>(), model_.flat_size(),
                      cfg_.adamw, static_cast<float>(s.lr), step_);
  model_.params_updated();
  return s;
}

// The host buffers are current unless this optimizer's moments are the device's resident set.
void Optimizer::pull_moments() {
  DeviceModel* d = model_.device();
  if (d && d->holds_moments(this)) d->get_moments(m_.data<float>(), v_.data<float>());
}

void Optimizer::moments_updated() {
  DeviceModel* d = model_.device();
  if (d && d->holds_moments(this)) d->set_moments(m_.data<float>(), v_.data<float>());
}

Optimizer::~Optimizer() {
  if (DeviceModel* d = model_.device()) d->unbind_moments(this);
}

}  // namespace temper
