#include "temper/spotlight/weight_store.h"

#include <algorithm>

#include "temper/core/error.h"

namespace temper::spotlight {

WeightStore::WeightStore(int64_t max_staleness) : max_staleness_(max_staleness) {
  TEMPER_CHECK(max_staleness >= 0) << "flow.spotlight.max_staleness: expected >= 0, got " << max_staleness;
}

void WeightStore::push(int64_t version, std::span<const float> params) {
  TEMPER_CHECK(version >= 0 && (held_.empty() || version == current() + 1))
      << "weight store: version " << version << " pushed after " << current() << " (expected "
      << (held_.empty() ? 0 : current() + 1) << ")";
  TEMPER_CHECK(held_.empty() || held_.back().second.size() == params.size())
      << "weight store: version " << version << " has " << params.size() << " parameters, the store holds "
      << held_.back().second.size();
  held_.emplace_back(version, std::vector<float>(params.begin(), params.end()));
  while (held_.front().first < version - max_staleness_) held_.pop_front();
}

int64_t WeightStore::current() const {
  return held_.empty() ? -1 : held_.back().first;
}
int64_t WeightStore::oldest() const {
  return held_.empty() ? -1 : held_.front().first;
}

bool WeightStore::has(int64_t version) const {
  return std::any_of(held_.begin(), held_.end(), [&](const auto& h) { return h.first == version; });
}

const std::vector<float>& WeightStore::get(int64_t version) const {
  for (const auto& [v, p] : held_)
    if (v == version) return p;
  TEMPER_FAIL() << "weight store: version " << version << " is not held (held: " << oldest() << ".." << current()
                << ", max_staleness " << max_staleness_ << ")";
}

int64_t WeightStore::explorer_version() const {
  TEMPER_CHECK(!held_.empty()) << "weight store: no version pushed yet";
  return std::max(current() - max_staleness_, oldest());
}

}  // namespace temper::spotlight
