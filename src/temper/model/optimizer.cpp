#include "temper/model/optimizer.h"

#include <algorithm>
#include <cmath>

#include "temper/core/error.h"
#include "temper/core/log.h"
#include "temper/core/profile.h"
#include "temper/model/lora.h"

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

void Optimizer::train_adapters(LoraAdapters* adapters) {
  TEMPER_CHECK(!adapters || !model_.device()) << "LoRA adapters are trained on the CPU only so far";
  TEMPER_CHECK(!sharded()) << "train_adapters: call before set_sharded";
  lora_ = adapters;
  m_ = Tensor::zeros({trainable_size()});
  v_ = Tensor::zeros({trainable_size()});
}

int64_t Optimizer::trainable_size() const {
  return lora_ ? lora_->size() : model_.flat_size();
}
float* Optimizer::trainable() {
  return lora_ ? lora_->params() : model_.params();
}
float* Optimizer::trainable_grads() {
  return lora_ ? lora_->grads() : model_.grads();
}

// A non-finite gradient norm skips the update (counted); otherwise the step counter advances.
bool Optimizer::counted(OptimizerStep& s) {
  if (std::isfinite(s.grad_norm)) return ++step_, true;
  s.skipped = true;
  ++skipped_;
  return false;
}

OptimizerStep Optimizer::step() {
  TEMPER_PROFILE("optimizer");
  TEMPER_CHECK(lora_ || !model_.held_base())
      << "optimizer: the model holds its base as bf16/int4 ([lora] base): only LoRA adapters train (train_adapters)";
  OptimizerStep s;
  if (DeviceModel* d = model_.device()) {  // the gradients, weights and moments live on the device
    d->bind_moments(this, m_.data<float>(), v_.data<float>());
    s.lr = cfg_.lr.at(step_);
    s.grad_norm = d->optimizer_step(comm_, cfg_.adamw, static_cast<float>(s.lr), step_ + 1, cfg_.max_grad_norm);
    if (!counted(s)) return s;
    model_.device_params_changed();
    return s;
  }
  if (sharded()) return sharded_step();
  if (comm_ && comm_->size() > 1) comm_->allreduce_sum(trainable_grads(), trainable_size());
  s.grad_norm = kernels::clip_grad_norm(trainable_grads(), trainable_size(), cfg_.max_grad_norm);
  s.lr = cfg_.lr.at(step_);
  if (!counted(s)) return s;
  kernels::adamw_step(trainable(), trainable_grads(), m_.data<float>(), v_.data<float>(), trainable_size(), cfg_.adamw,
                      static_cast<float>(s.lr), step_);
  model_.params_updated();
  return s;
}

void Optimizer::set_sharded(bool on) {
  pieces_.clear();
  int64_t n = trainable_size();
  if (on) {
    TEMPER_CHECK(!model_.device()) << "a sharded optimiser (ZeRO-1) runs on the CPU (on a GPU: not yet)";
    TEMPER_CHECK(comm_) << "a sharded optimiser needs the communicator first";
    pieces_ = comm_->pieces(trainable_size());
    n = 0;
    for (const auto& [off, len] : pieces_) n += len;
    if (pieces_.empty()) pieces_.emplace_back(0, 0);  // a rank with no piece (tiny models): still sharded
  }
  m_ = Tensor::zeros({n});
  v_ = Tensor::zeros({n});
}

// ZeRO-1: the gradients reduce-scattered, the global norm from every rank's pieces, AdamW on this rank's pieces,
// the weights all-gathered.
OptimizerStep Optimizer::sharded_step() {
  OptimizerStep s;
  const int64_t n = trainable_size();
  float* g = trainable_grads();
  comm_->reduce_scatter_sum(g, n);
  double sq = 0;
  for (const auto& [off, len] : pieces_) {
    const double x = kernels::grad_norm(g + off, len);
    sq += x * x;
  }
  comm_->allreduce_sum(&sq, 1);
  s.grad_norm = std::sqrt(sq);
  s.lr = cfg_.lr.at(step_);
  if (!counted(s)) return s;
  const double coef = cfg_.max_grad_norm > 0 ? cfg_.max_grad_norm / (s.grad_norm + 1e-6) : 1.0;
  float* p = trainable();
  int64_t at = 0;
  for (const auto& [off, len] : pieces_) {
    if (coef < 1.0)
      for (int64_t i = 0; i < len; ++i) g[off + i] *= static_cast<float>(coef);
    kernels::adamw_step(p + off, g + off, m_.data<float>() + at, v_.data<float>() + at, len, cfg_.adamw,
                        static_cast<float>(s.lr), step_);
    at += len;
  }
  comm_->allgather_pieces(p, n);
  model_.params_updated();
  return s;
}

void Optimizer::gather_moments(int root) {
  if (!sharded()) return;
  const int64_t n = trainable_size();
  const bool here = comm_->rank() == root;
  gathered_m_.assign(here ? static_cast<size_t>(n) : 0, 0.f);
  gathered_v_.assign(here ? static_cast<size_t>(n) : 0, 0.f);
  comm_->gather_pieces(m_.data<float>(), here ? gathered_m_.data() : nullptr, n, root);
  comm_->gather_pieces(v_.data<float>(), here ? gathered_v_.data() : nullptr, n, root);
}

void Optimizer::set_full_moments(const float* m, const float* v) {
  if (!sharded()) {
    std::copy(m, m + size(), this->m());
    std::copy(v, v + size(), this->v());
  } else {
    int64_t at = 0;
    for (const auto& [off, len] : pieces_) {
      std::copy(m + off, m + off + len, m_.data<float>() + at);
      std::copy(v + off, v + off + len, v_.data<float>() + at);
      at += len;
    }
  }
  moments_updated();
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
