// The residual stream's copies and adds over N rows of C floats, in parallel: at a prefill's or a training batch's
// size a serial copy left the other threads waiting at the next fork-join (transformer.cpp, transformer_paged.cpp).
#pragma once

#include <cstdint>
#include <cstring>

#include "temper/core/thread_pool.h"

namespace temper {

inline void copy_rows(float* dst, const float* src, int64_t N, int64_t C) {
  parallel_for(N, 64, [&](int64_t b, int64_t e) {
    std::memcpy(dst + b * C, src + b * C, static_cast<size_t>((e - b) * C) * sizeof(float));
  });
}

inline void add_rows(float* dst, const float* src, int64_t N, int64_t C) {
  parallel_for(N, 64, [&](int64_t b, int64_t e) {
    for (int64_t i = b * C; i < e * C; ++i) dst[i] += src[i];
  });
}

}  // namespace temper
