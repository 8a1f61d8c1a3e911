#include "temper/model/optimizer.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "temper/core/error.h"
#include "temper/core/log.h"
#include "temper/core/memory_info.h"
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
      << "optimizer: the model holds a bf16/int4/nf4 base ([lora] base): only LoRA adapters train (train_adapters)";
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

void Optimizer::set_sharded(bool on, bool gradients) {
  if (model_.grad_sink() == this) model_.set_grad_sink(nullptr);
  sharded_ = on, shard_grads_ = on && gradients;
  ranges_.clear(), pieces_.clear(), range_piece_.clear(), piece_at_.clear();
  std::vector<float>().swap(acc_);
  acc_full_ = false, remaining_ = 0, done_ = false;
  int64_t n = trainable_size();
  if (on) {
    TEMPER_CHECK(!model_.device()) << "a sharded optimiser (ZeRO-1) runs on the CPU (on a GPU: not yet)";
    TEMPER_CHECK(comm_) << "a sharded optimiser needs the communicator first";
    TEMPER_CHECK(!gradients || !lora_) << "sharded gradients (ZeRO-2) shard the model's own gradients: not with LoRA "
                                          "adapters (their gradients are small; shard the optimiser alone)";
    ranges_ = lora_ ? std::vector<std::pair<int64_t, int64_t>>{{0, n}} : model_.layout().ranges();
    n = 0;
    for (const auto& [off, len] : ranges_) {
      range_piece_.push_back(pieces_.size());
      for (const auto& [o, l] : comm_->pieces(len)) {
        pieces_.emplace_back(off + o, l);
        piece_at_.push_back(n);
        n += l;
      }
    }
    range_piece_.push_back(pieces_.size());
    piece_at_.push_back(n);
    if (shard_grads_) model_.set_grad_sink(this);
  }
  m_ = Tensor::zeros({n});
  v_ = Tensor::zeros({n});
}

// A backward finished `range`. Its first range opens the backward's round: every rank learns that one is running
// (gradients_done on a rank without one joins it with zeros).
void Optimizer::grads_final(size_t range) {
  // A backward outside an update (a pass with gradients between step() and the next zero_grad) would open a round
  // the other ranks never join.
  TEMPER_CHECK(update_open_) << "sharded gradients: a backward outside an update (call Optimizer::zero_grad first)";
  if (remaining_ == 0) {
    double running = 1;
    comm_->allreduce_sum(&running, 1);
    remaining_ = ranges_.size();
  }
  TEMPER_CHECK(range == remaining_ - 1) << "sharded gradients: the backward finished range " << range << ", expected "
                                        << remaining_ - 1 << " (the ranges go last to first)";
  reduce_range(range);
  --remaining_;
  if (remaining_ == 0) acc_full_ = true;
}

void Optimizer::reduce_range(size_t range) {
  TEMPER_PROFILE("reduce_gradients");
  const auto [off, len] = ranges_[range];
  float* g = model_.grads();
  comm_->reduce_scatter_sum(g + off, len);
  if (acc_.empty()) acc_.resize(static_cast<size_t>(piece_at_.back()));  // the update's first reduction
  float* acc = acc_.data();
  for (size_t k = range_piece_[range]; k < range_piece_[range + 1]; ++k) {
    const auto [o, l] = pieces_[k];
    float* a = acc + piece_at_[k];
    if (acc_full_)
      for (int64_t i = 0; i < l; ++i) a[i] += g[o + i];
    else
      std::copy(g + o, g + o + l, a);
  }
  zero_and_release(g + off, static_cast<size_t>(len) * sizeof(float));  // read as zeros, cost nothing
}

void Optimizer::grads_zeroed() {
  TEMPER_CHECK(remaining_ == 0) << "sharded gradients: zero_grad during a backward";
  zero_and_release(model_.grads(), static_cast<size_t>(model_.flat_size()) * sizeof(float));
  std::vector<float>().swap(acc_);
  acc_full_ = false, done_ = false;
}

void Optimizer::zero_grad() {
  if (shard_grads_) model_.set_grad_sink(this);  // this optimizer's update: its backward passes reduce into acc_
  model_.zero_grad();
  update_open_ = shard_grads_;
}

void Optimizer::skip() {
  ++skipped_;
  if (!shard_grads_) return;
  std::vector<float>().swap(acc_);  // the abandoned update's shard
  acc_full_ = false, done_ = false, update_open_ = false;
}

// Rounds until no rank runs a backward: each round's flag is 1 on a rank whose backward opened it (grads_final) and
// 0 here; a round with a 1 is joined with this rank's (zero) gradients, range by range in the backward's order.
void Optimizer::gradients_done() {
  if (!shard_grads_ || done_) return;
  TEMPER_CHECK(remaining_ == 0) << "sharded gradients: gradients_done during a backward";
  for (;;) {
    double running = 0;
    comm_->allreduce_sum(&running, 1);
    if (running == 0) break;
    for (size_t r = ranges_.size(); r-- > 0;) reduce_range(r);
    acc_full_ = true;
  }
  done_ = true;
}

// ZeRO-1: the gradients reduce-scattered range by range (ZeRO-2: gathered already), the global norm from every
// rank's pieces, AdamW on this rank's pieces, the weights all-gathered.
OptimizerStep Optimizer::sharded_step() {
  OptimizerStep s;
  float* g = trainable_grads();
  if (shard_grads_) {
    gradients_done();
    if (!acc_full_) acc_.assign(static_cast<size_t>(piece_at_.back()), 0.f);  // none ran a backward
    // The next update starts empty.
    acc_full_ = false, done_ = false, update_open_ = false;
  } else {
    for (const auto& [off, len] : ranges_) comm_->reduce_scatter_sum(g + off, len);
  }
  // Piece k's gradients: packed in acc_ (ZeRO-2) or in place in the flat buffer.
  auto grad_of = [&](size_t k) { return shard_grads_ ? acc_.data() + piece_at_[k] : g + pieces_[k].first; };
  double sq = 0;
  for (size_t k = 0; k < pieces_.size(); ++k) {
    const double x = kernels::grad_norm(grad_of(k), pieces_[k].second);
    sq += x * x;
  }
  comm_->allreduce_sum(&sq, 1);
  s.grad_norm = std::sqrt(sq);
  s.lr = cfg_.lr.at(step_);
  if (!counted(s)) {
    std::vector<float>().swap(acc_);
    return s;
  }
  const double coef = cfg_.max_grad_norm > 0 ? cfg_.max_grad_norm / (s.grad_norm + 1e-6) : 1.0;
  float* p = trainable();
  for (size_t k = 0; k < pieces_.size(); ++k) {
    const auto [off, len] = pieces_[k];
    float* gk = grad_of(k);
    if (coef < 1.0)
      for (int64_t i = 0; i < len; ++i) gk[i] *= static_cast<float>(coef);
    kernels::adamw_step(p + off, gk, m_.data<float>() + piece_at_[k], v_.data<float>() + piece_at_[k], len, cfg_.adamw,
                        static_cast<float>(s.lr), step_);
  }
  for (const auto& [off, len] : ranges_) comm_->allgather_pieces(p + off, len);
  std::vector<float>().swap(acc_);  // until the next update's first reduction
  model_.params_updated();
  return s;
}

void Optimizer::gather_moments(int root) {
  if (!sharded()) return;
  const int64_t n = trainable_size();
  const bool here = comm_->rank() == root;
  gathered_m_.assign(here ? static_cast<size_t>(n) : 0, 0.f);
  gathered_v_.assign(here ? static_cast<size_t>(n) : 0, 0.f);
  for (size_t i = 0; i < ranges_.size(); ++i) {
    const auto [off, len] = ranges_[i];
    const int64_t at = piece_at_[range_piece_[i]];
    comm_->gather_pieces(m_.data<float>() + at, here ? gathered_m_.data() + off : nullptr, len, root);
    comm_->gather_pieces(v_.data<float>() + at, here ? gathered_v_.data() + off : nullptr, len, root);
  }
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
  if (model_.grad_sink() == this) model_.set_grad_sink(nullptr);
  if (DeviceModel* d = model_.device()) d->unbind_moments(this);
}

}  // namespace temper
