#include "temper/model/activation_store.h"

#include "temper/core/error.h"

namespace temper {

ActivationStore::ActivationStore(int64_t record_floats) : record_floats_(record_floats) {
  TEMPER_CHECK(record_floats > 0) << "activation store: records of " << record_floats << " floats";
}

void ActivationStore::reset(int64_t slots, uint64_t params_version) {
  TEMPER_CHECK(slots >= 0) << "activation store: " << slots << " slots";
  if (slots > allocated_) {
    data_.reset(new float[static_cast<size_t>(slots * record_floats_)]);
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
