// The speculative drafter of EfficientRollout: a 4-bit copy of the policy's block linears (q/k/v,
// o, gate/up, down of every layer; RTN asymmetric uint4, group 128, kernels/int4_matmul.h). The
// embeddings, norms and biases are not copied: the drafter reads the policy's own, and it attends
// over the policy's KV cache for the committed prefix (Transformer::forward_paged with a drafter).
// The LM head: bf16 by default (the paper's 16-bit head), int4 or f32 on request, optionally over a
// vocabulary subset (FR-Spec, Zhao et al. 2025). docs/METHODS.md has the acceptance and speed of each.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <vector>

#include "temper/core/settings.h"
#include "temper/kernels/int4_matmul.h"

namespace temper {

class Transformer;

enum class DraftHead { bf16, int4, f32 };
inline constexpr EnumNames<DraftHead, 3> kDraftHeadNames{
    {{DraftHead::bf16, "bf16"}, {DraftHead::int4, "int4"}, {DraftHead::f32, "f32"}}};
// "bf16", "int4" or "f32"; anything else is an error naming `what` (the flag or recipe key).
DraftHead draft_head_named(const std::string& name, const std::string& what);

struct Int4Layer {
  kernels::Int4Weights qkv, o, gu, down;
};

// The LM head (a fifth of a small model's bytes: SmolLM2-135M has 28M of 135M parameters there):
// bf16 by default, the paper's 16-bit head (a bf16 copy made at each refresh); int4 (group 32) or
// the policy's own f32 head on request. docs/METHODS.md has the acceptance and speed of each. refresh() re-quantizes
// from the current weights after every update (what the released code does); with lag = k the copy in use is the one
// quantized k refreshes earlier (the "drafter from k steps before" of the press description, to measure what staleness
// costs). On a device (Transformer::attach_device) the drafter's pass runs there too
// (DeviceModel::forward_paged_draft): the weights are quantized here, in the layout the device reads, and uploaded when
// the copy in use changes (copy_id()).
//
// Vocabulary subset (set_vocab(K), FR-Spec's frequency-ranked draft head, Zhao et al. 2025): the drafter's LM head
// keeps only K rows, the K tokens seen most often in the completions observe() was given (ties and unseen tokens by
// lower id, so before any observation the K lowest ids), chosen at each refresh. Its logits over the other tokens are
// -inf: the drafter never proposes them, and the acceptance rule stays exact (the residual max(0, p - q) draws them
// when the policy does). A device drafts over the subset too, with these rows (uploaded with the copy). It cuts the
// head's bytes and products by V / K, the half of a small model's drafter that does not shrink with 4 bits
// (SmolLM2-135M: 54 of 111 MB); docs/METHODS.md has what it costs in acceptance.
class Int4Drafter {
 public:
  // The int4 head's group: finer than the blocks' (the logits are what acceptance compares).
  static constexpr int64_t kHeadGroup = 32;
  // layout: the int4 weights' layout; unset: for a model with a device attached the device's
  // (DeviceModel::int4_layout: rows for CUDA), else the CPU's preferred one (cols16 with AVX-512 VNNI).
  explicit Int4Drafter(int64_t group = 128, int64_t lag = 0, DraftHead head = DraftHead::bf16,
                       std::optional<kernels::Int4Layout> layout = std::nullopt);
  // The head's vocabulary: k rows from the next refresh on (0: every token). Needs a bf16 or int4 head.
  void set_vocab(int64_t k);
  int64_t vocab() const { return vocab_; }
  // Counts the tokens (completions the policy sampled) that rank the subset at the next refresh.
  void observe(const std::vector<int32_t>& tokens);
  const std::vector<uint64_t>& counts() const { return counts_; }
  void set_counts(std::vector<uint64_t> counts) { counts_ = std::move(counts); }
  // Quantizes the model's current weights (pushes a copy; the one in use is `lag` refreshes old,
  // or the oldest kept while fewer exist).
  void refresh(const Transformer& model);
  bool ready() const { return !copies_.empty(); }
  DraftHead head() const { return head_; }
  // Which quantization the copy in use is (an id unique in the process): a device re-uploads when it changes.
  uint64_t copy_id() const;
  const std::vector<Int4Layer>& layers() const;  // the copy in use
  const kernels::Int4Weights* head_int4() const;  // its LM head, by kind (null when another kind)
  const uint16_t* head_bf16() const;
  bool head_bf16_packed() const;  // head_bf16() is kernels::bf16_pack_weight's layout (else row-major)
  // The token of each head row of the copy in use, ascending (empty: the whole vocabulary, row = token).
  const std::vector<int32_t>& vocab_ids() const;
  // The share of `tokens` inside the copy in use's vocabulary (1 when it is the whole one).
  double vocab_coverage(const std::vector<int32_t>& tokens) const;
  size_t bytes() const;  // of the copy in use

 private:
  struct Copy {
    std::vector<Int4Layer> layers;
    kernels::Int4Weights head;
    std::vector<uint16_t> head16;
    bool head16_packed = false;
    std::vector<int32_t> ids;  // the head's tokens, ascending (empty: all)
    uint64_t id = 0;
  };
  int64_t group_, lag_;
  DraftHead head_;
  std::optional<kernels::Int4Layout> layout_;
  std::deque<Copy> copies_;  // newest at the back, at most lag + 1
  int64_t vocab_ = 0;
  std::vector<uint64_t> counts_;  // by token id (grown as tokens are observed)
};

// The k tokens of a vocabulary of v ranked first by count (descending), then by id (ascending), in ascending id order.
std::vector<int32_t> draft_vocabulary(const std::vector<uint64_t>& counts, int64_t v, int64_t k);
// The share of `tokens` in `ids` (ascending; empty: every token, 1).
double vocabulary_coverage(const std::vector<int32_t>& ids, const std::vector<int32_t>& tokens);

}  // namespace temper
