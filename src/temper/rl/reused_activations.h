// Which store slots a packed micro-batch can take its activations from (rl.reuse_activations): the
// update's first optimizer step trains on the weights that produced the rollout, so a packed row whose
// token, position and context the rollout forwarded exactly needs no forward (ActivationStore,
// Transformer::forward_backward_packed with slots).
#pragma once

#include <cstdint>
#include <vector>

#include "temper/model/activation_store.h"
#include "temper/rl/packed_rows.h"

namespace temper::rl {

// The check is on the packed layout itself: every packed row's slot must hold its token at its position, and
// link (the tag's `prev`) to the slot of the packed row before it in its segment, or to the last row of the
// prefix it reads, or to nothing at position 0. Rows a method edited or rebuilt, rows of another rank's
// rollout, and rows whose slots ran out fail it, and the micro-batch runs the ordinary forward.
// packed: the micro-batch's rows at stride T (packed.from[n] = row * T + position); tokens: the packed
// rows' tokens; row_slots[r]: row r's Completion::act_slots. Fills *slots (one per packed row) and
// returns true when every row passes; false leaves *slots unspecified.
bool reusable_slots(const ActivationStore& store, const PackedRows& packed, const int32_t* tokens,
                    const std::vector<const std::vector<int64_t>*>& row_slots, int64_t T, std::vector<int64_t>* slots);

}  // namespace temper::rl
