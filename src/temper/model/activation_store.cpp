#include "temper/model/activation_store.h"

#include "temper/core/error.h"

namespace temper {

ActivationStore::ActivationStore(std::vector<int64_t> field_widths) : widths_(std::move(field_widths)) {
  TEMPER_CHECK(!widths_.empty()) << "activation store: no fields";
  for (int64_t w : widths_) {
    TEMPER_CHECK(w > 0) << "activation store: a field of width " << w;
    offsets_.push_back(slot_floats_);
    slot_floats_ += w;
  }
}

void ActivationStore::reset(int64_t slots, uint64_t params_version) {
  TEMPER_CHECK(slots >= 0) << "activation store: " << slots << " slots";
  if (slots > allocated_) {
    data_.reset(new float[static_cast<size_t>(slots * slot_floats_)]);
    tags_.reset(new Tag[static_cast<size_t>(slots)]);
    allocated_ = slots;
  }
  capacity_ = slots;
  size_ = 0;
  version_ = params_version;
}

int64_t ActivationStore::add(int32_t token, int32_t pos, int64_t prev) {
  if (size_ >= capacity_) return -1;
  tags_[static_cast<size_t>(size_)] = Tag{token, pos, prev};
  return size_++;
}

}  // namespace temper
