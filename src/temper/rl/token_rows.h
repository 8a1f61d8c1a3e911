// The update's per-position fields of a batch's rows (what the loss and the forward read), in one struct:
// row r's position p (the one predicting the row's token p + 1) at r * T + p, right-padded, or packed
// (PackedRows: shared prompts once, no padding). The update selects a mini-batch's rows, compacts a
// micro-batch to its longest row and packs it; each copies every field in one place. Leaves out how rows
// are ordered and which rank owns them (policy_update.cpp) and the reference pass (scorer.h).
#pragma once

#include <cstdint>
#include <vector>

#include "temper/rl/batch.h"
#include "temper/rl/packed_rows.h"

namespace temper::rl {

// Non-owning pointers into TokenRows at some row; a field that is empty there (ref without KL) is null.
struct TokenRowsView {
  const int32_t* tok = nullptr;  // the row's tokens (prompt, completion, 0 padding)
  const int32_t* tgt = nullptr;  // the token each position predicts (-1: none)
  const float* old = nullptr;    // log-prob under the policy that sampled it
  const float* adv = nullptr;    // advantage
  const float* weight = nullptr;
  const float* scale = nullptr;  // the position's weight in the batch loss (policy_loss_scale; per mini-batch)
  const float* ref = nullptr;    // log-prob under the frozen reference (the KL term)
  float* logp = nullptr;         // the forward's outputs
  float* entropy = nullptr;
};

struct TokenRows {
  int64_t rows = 0, T = 0;  // packed: rows = packed positions, T = 1
  std::vector<int32_t> tok, tgt;
  std::vector<float> mask, old, adv, weight, scale, ref;
  std::vector<float> logp, entropy;

  // Every trajectory of `b` a row, at the stride of its longest (prompt + completion, at least 2); no scale,
  // ref or outputs yet.
  static TokenRows from(const Batch& b);
  TokenRowsView view(int64_t row = 0);
  // These rows := rows `which` of `all` (same stride), with scale and outputs zeroed.
  void select(const TokenRows& all, const std::vector<int64_t>& which);
  // These rows := `n` rows of `src` at stride src_T cut to their first Tm positions. The loss's fields only:
  // the mask is in the scale by now. Outputs are sized, not zeroed.
  void compact(const TokenRowsView& src, int64_t src_T, int64_t n, int64_t Tm);
  // These rows := `src`'s rows (at packed's stride) in packed order: packed position k holds src position
  // packed.from[k]. The loss's fields only; outputs zeroed.
  void pack(const TokenRowsView& src, const PackedRows& packed);
};

}  // namespace temper::rl
