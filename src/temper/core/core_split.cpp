// CoreSplit (core_split.h): two sides' thread counts following which of them works.
#include "temper/core/core_split.h"

#include "temper/core/error.h"

namespace temper {

CoreSplit::CoreSplit(int first, int second) : share_{first, second}, threads_{first, second} {
  TEMPER_CHECK(first >= 1 && second >= 1) << "core split: shares must be >= 1, got " << first << " and " << second;
}

void CoreSplit::set_working(int side, bool working) {
  TEMPER_CHECK(side == 0 || side == 1) << "core split: side 0 or 1, got " << side;
  std::lock_guard<std::mutex> g(mu_);
  working_[side] = working;
  for (int s = 0; s < 2; ++s)
    threads_[s].store(share_[s] + (working_[1 - s] ? 0 : share_[1 - s]), std::memory_order_relaxed);
}

const std::atomic<int>& CoreSplit::threads(int side) const {
  TEMPER_CHECK(side == 0 || side == 1) << "core split: side 0 or 1, got " << side;
  return threads_[side];
}

}  // namespace temper
