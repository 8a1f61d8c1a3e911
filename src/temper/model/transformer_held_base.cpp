// The frozen base held as bf16 / int4 / nf4 under LoRA ([lora] base): planned before loading, each product taken as
// its values are written (params_written) or all at once (hold_base), then its f32 pages given back (FrozenBase).
#include <cstdint>
#include <memory>

#include "temper/core/error.h"
#include "temper/model/frozen_base.h"
#include "temper/model/lora.h"
#include "temper/model/transformer.h"

namespace temper {

void Transformer::hold_base(LoraBase format) {
  if (format == LoraBase::f32) return;
  const FrozenBase* b = base_ ? base_.get() : holding_.get();
  TEMPER_CHECK(!b || b->format() == format)
      << "hold_base: the base is held as " << lora_base_name(b->format()) << " already, not " << lora_base_name(format);
  if (base_) return;
  TEMPER_CHECK(!device_) << "hold_base: this model runs on a device; a held base runs on the CPU only so far";
  pull_params();
  if (!holding_) plan_held_base(format);
  // What was not taken as it was written (all of it when no load reported, as after init or a whole f32 load).
  for (const FrozenBase::Weight& w : holding_->weights())
    if (!holding_->taken(w.offset)) take_held(w.offset);
  finish_held_base();
}

void Transformer::plan_held_base(LoraBase format) {
  if (format == LoraBase::f32) return;
  const FrozenBase* b = base_ ? base_.get() : holding_.get();
  if (b) {
    TEMPER_CHECK(b->format() == format) << "plan_held_base: the base is held as " << lora_base_name(b->format())
                                        << " already, not " << lora_base_name(format);
    return;
  }
  TEMPER_CHECK(!device_) << "plan_held_base: this model runs on a device; a held base runs on the CPU only so far";
  holding_ = std::make_shared<FrozenBase>(cfg_, layout_, format);
  unwritten_.clear();
  for (const FrozenBase::Weight& w : holding_->weights()) unwritten_.push_back(w.N * w.K);
}

void Transformer::params_written(int64_t offset, int64_t n) {
  if (!holding_ || n <= 0) return;
  const FrozenBase::Weight* w = holding_->containing(offset);
  if (!w) {  // not a held product's, and not reaching into one (its count would never come down)
    TEMPER_CHECK(!holding_->containing(offset + n - 1))
        << "params_written: [" << offset << ", " << offset + n << ") runs into a held product; report each entry";
    return;
  }
  TEMPER_CHECK(offset + n <= w->offset + w->N * w->K)
      << "params_written: [" << offset << ", " << offset + n << ") runs past the held product at " << w->offset;
  int64_t& left = unwritten_[static_cast<size_t>(w - holding_->weights().data())];
  TEMPER_CHECK(n <= left) << "params_written: the product at " << w->offset
                          << " was written whole already (it is held now: its f32 values are gone)";
  left -= n;
  if (left > 0) return;
  take_held(w->offset);
  if (holding_->complete()) finish_held_base();
}

void Transformer::take_held(int64_t offset) {
  float* p = params_.data<float>();
  holding_->take(offset, p + offset);
  holding_->release_in(p, offset);
}

void Transformer::finish_held_base() {
  base_ = std::move(holding_);
  holding_.reset();
  unwritten_.clear();
  base_->release_in(grads_.data<float>());  // never written for the products: the zeros they read already
  params_bf16_ = params_bf16p_ = params_f32p_ = Tensor();  // remade without the held products (forward_weights)
  packed_at_.clear();
  ++params_version_;
}

}  // namespace temper
