// The rollout's per-token activations kept for the update (rl.reuse_activations). Until the first
// optimizer step the update's forward over a rollout row repeats what the rollout computed with the
// same weights, so Transformer::forward_backward_packed can take each position's activations from
// here and run only the classifier and the backward. One slot per token the policy forwarded: a
// record of every layer's saved values (Transformer::act_record_floats) and the final residual, and
// a tag (the token, its position, and the slot its sequence's previous position had when this one
// was computed). A row is taken from the store only when every position's tag chain matches the
// row's own tokens (rl::reusable_slots), so rows a method edited or rebuilt run the forward.
#pragma once

#include <cstdint>
#include <memory>

namespace temper {

class ActivationStore {
 public:
  explicit ActivationStore(int64_t record_floats);

  // Forgets every slot and makes room for `slots` (memory grows, never shrinks); the slots that follow
  // hold activations of weights at `params_version` (Transformer::params_version).
  void reset(int64_t slots, uint64_t params_version);
  // A new slot for `token` at `pos` whose sequence's previous position is in slot `prev` (-1 at
  // position 0); -1 when the store is full.
  int64_t add(int32_t token, int32_t pos, int64_t prev);

  int64_t size() const { return size_; }
  int64_t capacity() const { return capacity_; }
  int64_t record_floats() const { return record_floats_; }
  uint64_t params_version() const { return version_; }
  int32_t token(int64_t s) const { return tags_[static_cast<size_t>(s)].token; }
  int32_t pos(int64_t s) const { return tags_[static_cast<size_t>(s)].pos; }
  int64_t prev(int64_t s) const { return tags_[static_cast<size_t>(s)].prev; }
  float* record(int64_t s) { return data_.get() + s * record_floats_; }
  const float* record(int64_t s) const { return data_.get() + s * record_floats_; }

 private:
  struct Tag {
    int32_t token, pos;
    int64_t prev;
  };
  int64_t record_floats_;
  int64_t capacity_ = 0, allocated_ = 0, size_ = 0;
  uint64_t version_ = 0;
  std::unique_ptr<float[]> data_;  // not zeroed: a slot is written before it is read
  std::unique_ptr<Tag[]> tags_;
};

}  // namespace temper
