#include "temper/core/arena.h"

namespace temper {

void Arena::reserve(size_t bytes) {
  release();
  base_ = static_cast<char*>(aligned_alloc_bytes(bytes));
  cap_ = bytes;
}

void Arena::release() {
  if (base_) aligned_free_bytes(base_, cap_);
  base_ = nullptr;
  cap_ = used_ = peak_ = 0;
}

void* Arena::alloc_bytes(size_t bytes) {
  size_t n = (bytes + 63) / 64 * 64;
  TEMPER_CHECK(used_ + n <= cap_) << "arena overflow: need " << used_ + n << " bytes, planned " << cap_
                                  << " (the memory plan is wrong; please report)";
  void* p = base_ + used_;
  used_ += n;
  if (used_ > peak_) peak_ = used_;
  return p;
}

}  // namespace temper
