#include "temper/rl/packed_rows.h"

#include "temper/core/error.h"

namespace temper::rl {

PackedRows pack_rows(const std::vector<const std::vector<int32_t>*>& prompts, const std::vector<int64_t>& lengths,
                     int64_t T) {
  TEMPER_CHECK(prompts.size() == lengths.size()) << "pack_rows: " << prompts.size() << " prompts for " << lengths.size() << " rows";
  const int64_t R = static_cast<int64_t>(prompts.size());
  PackedRows out;
  std::vector<int64_t> prefix_of(static_cast<size_t>(R), -1);  // a row's prefix segment, once made
  std::vector<int64_t> first_with(static_cast<size_t>(R), -1);  // the first row with the same prompt
  for (int64_t r = 0; r < R; ++r) {
    TEMPER_CHECK(lengths[static_cast<size_t>(r)] <= T && static_cast<int64_t>(prompts[static_cast<size_t>(r)]->size()) <= lengths[static_cast<size_t>(r)])
        << "pack_rows: row " << r << " holds " << lengths[static_cast<size_t>(r)] << " tokens (prompt "
        << prompts[static_cast<size_t>(r)]->size() << ", stride " << T << ")";
    for (int64_t s = 0; s < r && first_with[static_cast<size_t>(r)] < 0; ++s)
      if (first_with[static_cast<size_t>(s)] == s && *prompts[static_cast<size_t>(s)] == *prompts[static_cast<size_t>(r)]) first_with[static_cast<size_t>(r)] = s;
    if (first_with[static_cast<size_t>(r)] < 0) first_with[static_cast<size_t>(r)] = r;
  }
  std::vector<int64_t> readers(static_cast<size_t>(R), 0);
  for (int64_t r = 0; r < R; ++r) ++readers[static_cast<size_t>(first_with[static_cast<size_t>(r)])];
  for (int64_t r = 0; r < R; ++r) {
    const int64_t f = first_with[static_cast<size_t>(r)], P = static_cast<int64_t>(prompts[static_cast<size_t>(r)]->size());
    kernels::AttnSegment g;
    int64_t begin = 0;
    if (readers[static_cast<size_t>(f)] > 1 && P >= 2) {
      if (prefix_of[static_cast<size_t>(f)] < 0) {  // the prompt's first P - 1 tokens, from the first reader's row
        kernels::AttnSegment p;
        p.start = out.size(), p.len = P - 1;
        for (int64_t t = 0; t + 1 < P; ++t) out.from.push_back(r * T + t);
        prefix_of[static_cast<size_t>(f)] = static_cast<int64_t>(out.segs.size());
        out.segs.push_back(p);
      }
      const kernels::AttnSegment& p = out.segs[static_cast<size_t>(prefix_of[static_cast<size_t>(f)])];
      g.prefix_start = p.start, g.prefix_len = p.len;
      begin = P - 1;
      ++out.shared_rows;
    }
    g.start = out.size();
    for (int64_t t = begin; t < lengths[static_cast<size_t>(r)]; ++t) out.from.push_back(r * T + t);
    g.len = out.size() - g.start;
    out.segs.push_back(g);
  }
  return out;
}

}  // namespace temper::rl
