// A micro-batch of padded update rows packed for Transformer::forward_backward_packed. Rows whose
// prompts are equal (a GRPO group's samples) hold the prompt once: all but its last token form a
// prefix segment, and each row's segment starts at the prompt's last token, so every completion
// token keeps its own predicting row. Nothing is padded. A group of G rows with a P-token prompt
// costs P - 1 + G (1 + completion) rows instead of G (P + completion) plus padding.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "temper/kernels/attention.h"

namespace temper::rl {

struct PackedRows {
  std::vector<kernels::AttnSegment> segs;
  std::vector<int64_t> from;  // packed row n holds padded index from[n] (row * T + position)
  int64_t shared_rows = 0;    // rows that read a prompt held once
  int64_t size() const { return static_cast<int64_t>(from.size()); }
  // out[n] = in[from[n]] for every packed row.
  template <class T>
  void gather(const T* in, std::vector<T>* out) const {
    out->resize(from.size());
    for (std::size_t n = 0; n < from.size(); ++n) (*out)[n] = in[from[n]];
  }
};

// prompts[r] and lengths[r] (prompt + completion tokens, <= T) of each padded row r at stride T.
PackedRows pack_rows(const std::vector<const std::vector<int32_t>*>& prompts, const std::vector<int64_t>& lengths,
                     int64_t T);

}  // namespace temper::rl
