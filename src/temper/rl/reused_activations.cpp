#include "temper/rl/reused_activations.h"

namespace temper::rl {

bool reusable_slots(const ActivationStore& store, const PackedRows& packed, const int32_t* tokens,
                    const std::vector<const std::vector<int64_t>*>& row_slots, int64_t T, std::vector<int64_t>* slots) {
  const int64_t N = packed.size();
  slots->assign(static_cast<size_t>(N), -1);
  for (int64_t n = 0; n < N; ++n) {
    const int64_t from = packed.from[static_cast<size_t>(n)], r = from / T, p = from % T;
    if (r >= static_cast<int64_t>(row_slots.size())) return false;
    const std::vector<int64_t>& rs = *row_slots[static_cast<size_t>(r)];
    if (p >= static_cast<int64_t>(rs.size())) return false;
    const int64_t s = rs[static_cast<size_t>(p)];
    if (s < 0 || s >= store.size()) return false;
    (*slots)[static_cast<size_t>(n)] = s;
  }
  for (const kernels::AttnSegment& g : packed.segs)
    for (int64_t t = 0; t < g.len; ++t) {
      const int64_t n = g.start + t, s = (*slots)[static_cast<size_t>(n)];
      const int64_t before = t > 0              ? (*slots)[static_cast<size_t>(n - 1)]
                             : g.prefix_len > 0 ? (*slots)[static_cast<size_t>(g.prefix_start + g.prefix_len - 1)]
                                                : -1;
      if (store.token(s) != tokens[n] || store.pos(s) != g.prefix_len + t || store.prev(s) != before) return false;
    }
  return true;
}

}  // namespace temper::rl
