// The decoder layer's four block products as (N outputs, K inputs), in the layer's order: the fused q/k/v, o,
// the fused gate/up and down. One list for the forward's packed copies (Transformer::forward_weights), the frozen
// base (model/frozen_base.cpp: what it holds, its bytes) and the memory plan (app/memory_plan.cpp).
#pragma once

#include <array>
#include <cstdint>
#include <utility>

#include "temper/model/config.h"
#include "temper/model/param_layout.h"

namespace temper {

inline std::array<std::pair<int64_t, int64_t>, 4> block_products(const ModelConfig& c) {
  const int64_t C = c.hidden_size, Hq = c.num_heads * c.head_dim, F = c.intermediate_size;
  return {{{c.qkv_dim(), C}, {C, Hq}, {2 * F, C}, {C, F}}};
}

// Their weights' offsets in one layer of the flat layout, in the same order.
inline std::array<int64_t, 4> block_product_offsets(const LayerOffsets& o) {
  return {o.w_qkv, o.w_o, o.w_gu, o.w_down};
}

}  // namespace temper
