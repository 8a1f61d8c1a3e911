// The speculative drafter of EfficientRollout: a 4-bit copy of the policy's block linears (q/k/v,
// o, gate/up, down of every layer; RTN asymmetric uint4, group 128, kernels/int4_matmul.h). The
// embeddings, norms, biases and LM head are not copied: the drafter reads the policy's own, and
// it attends over the policy's KV cache for the committed prefix (Transformer::forward_paged with
// a drafter). refresh() re-quantizes from the current weights after every update (what the
// released code does); with lag = k the copy in use is the one quantized k refreshes earlier (the
// "drafter from k steps before" of the press description, to measure what staleness costs).
#pragma once

#include <cstdint>
#include <deque>
#include <vector>

#include "temper/kernels/int4_matmul.h"

namespace temper {

class Transformer;

struct Int4Layer {
  kernels::Int4Weights qkv, o, gu, down;
};

class Int4Drafter {
 public:
  explicit Int4Drafter(int64_t group = 128, int64_t lag = 0);
  // Quantizes the model's current weights (pushes a copy; the one in use is `lag` refreshes old,
  // or the oldest kept while fewer exist).
  void refresh(const Transformer& model);
  bool ready() const { return !copies_.empty(); }
  const std::vector<Int4Layer>& layers() const;  // the copy in use
  int64_t lag() const { return lag_; }
  int64_t group() const { return group_; }
  size_t bytes() const;             // of the copy in use
  double last_refresh_s() const { return last_s_; }
  int64_t refreshes() const { return refreshes_; }

 private:
  int64_t group_, lag_;
  std::deque<std::vector<Int4Layer>> copies_;  // newest at the back, at most lag + 1
  double last_s_ = 0;
  int64_t refreshes_ = 0;
};

}  // namespace temper
