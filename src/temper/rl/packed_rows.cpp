#include "temper/rl/packed_rows.h"

#include "temper/core/error.h"

namespace temper::rl {

PackedRows pack_rows(const std::vector<const std::vector<int32_t>*>& prompts, const std::vector<int64_t>& lengths,
                     int64_t T) {
  TEMPER_CHECK(prompts.size() == lengths.size())
      << "pack_rows: " << prompts.size() << " prompts for " << lengths.size() << " rows";
  const size_t R = prompts.size();
  std::vector<size_t> first_with(R);  // the first row with the same prompt
  std::vector<int64_t> readers(R, 0), prefix_of(R, -1);  // rows per prompt; its prefix segment, once made
  for (size_t r = 0; r < R; ++r) {
    const int64_t P = static_cast<int64_t>(prompts[r]->size());
    TEMPER_CHECK(lengths[r] <= T && P <= lengths[r])
        << "pack_rows: row " << r << " holds " << lengths[r] << " tokens (prompt " << P << ", stride " << T << ")";
    first_with[r] = r;
    for (size_t s = 0; s < r; ++s)
      if (first_with[s] == s && *prompts[s] == *prompts[r]) {
        first_with[r] = s;
        break;
      }
    ++readers[first_with[r]];
  }
  PackedRows out;
  for (size_t r = 0; r < R; ++r) {
    const size_t f = first_with[r];
    const int64_t P = static_cast<int64_t>(prompts[r]->size()), row = static_cast<int64_t>(r) * T;
    kernels::AttnSegment g;
    int64_t begin = 0;
    if (readers[f] > 1 && P >= 2) {
      if (prefix_of[f] < 0) {  // the prompt's first P - 1 tokens, from its first reader's row
        kernels::AttnSegment p;
        p.start = out.size(), p.len = P - 1;
        for (int64_t t = 0; t + 1 < P; ++t) out.from.push_back(row + t);
        prefix_of[f] = static_cast<int64_t>(out.segs.size());
        out.segs.push_back(p);
      }
      const kernels::AttnSegment& p = out.segs[static_cast<size_t>(prefix_of[f])];
      g.prefix_start = p.start, g.prefix_len = p.len;
      begin = P - 1;
      ++out.shared_rows;
    }
    g.start = out.size();
    for (int64_t t = begin; t < lengths[r]; ++t) out.from.push_back(row + t);
    g.len = out.size() - g.start;
    out.segs.push_back(g);
  }
  return out;
}

}  // namespace temper::rl
