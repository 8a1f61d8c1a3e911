// The rollout's per-token activations kept for the update (rl.reuse_activations). Until the first
// optimizer step the update's forward over a rollout row repeats what the rollout computed with the
// same weights, so Transformer::forward_backward_packed can take each position's activations from
// here and run only the classifier and the backward.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

namespace temper {

// One slot per token the policy forwarded, in every field the backward reads (Transformer::act_field_widths:
// each layer's saved values, then the final residual), field-major: field k is a [capacity, width k] array,
// so a step whose rows fill consecutive slots writes each field as one block (the paged forward writes
// straight into them). Each slot has a tag (its token, its position, and the slot its sequence's previous
// position had when it was computed); a row is taken from the store only when every position's tag chain
// matches the row's own tokens (rl::reusable_slots), so rows a method edited or rebuilt run the forward.
class ActivationStore {
 public:
  explicit ActivationStore(std::vector<int64_t> field_widths);

  // Forgets every slot and makes room for `slots` (memory grows, never shrinks); the slots that follow
  // hold activations of weights at `params_version` (Transformer::params_version).
  void reset(int64_t slots, uint64_t params_version);
  // A new slot for `token` at `pos` whose sequence's previous position is in slot `prev` (-1 at
  // position 0); -1 when the store is full.
  int64_t add(int32_t token, int32_t pos, int64_t prev);

  int64_t size() const { return size_; }
  int64_t capacity() const { return capacity_; }
  const std::vector<int64_t>& field_widths() const { return widths_; }
  int64_t slot_floats() const { return slot_floats_; }
  uint64_t params_version() const { return version_; }
  int32_t token(int64_t s) const { return tags_[static_cast<size_t>(s)].token; }
  int32_t pos(int64_t s) const { return tags_[static_cast<size_t>(s)].pos; }
  int64_t prev(int64_t s) const { return tags_[static_cast<size_t>(s)].prev; }
  // Field k of slot s is field(k) + s * field_widths()[k].
  float* field(size_t k) { return data_.get() + offsets_[k] * capacity_; }
  const float* field(size_t k) const { return data_.get() + offsets_[k] * capacity_; }

 private:
  struct Tag {
    int32_t token, pos;
    int64_t prev;
  };
  std::vector<int64_t> widths_, offsets_;  // offsets_[k]: floats per slot in the fields before k
  int64_t slot_floats_ = 0;
  int64_t capacity_ = 0, allocated_ = 0, size_ = 0;
  uint64_t version_ = 0;
  std::unique_ptr<float[]> data_;  // not zeroed: a slot is written before it is read
  std::unique_ptr<Tag[]> tags_;
};

}  // namespace temper
