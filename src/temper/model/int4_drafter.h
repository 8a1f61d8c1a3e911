// The speculative drafter of EfficientRollout: a 4-bit copy of the policy's block linears (q/k/v,
// o, gate/up, down of every layer; RTN asymmetric uint4, group 128, kernels/int4_matmul.h). The
// embeddings, norms and biases are not copied: the drafter reads the policy's own, and it attends
// over the policy's KV cache for the committed prefix (Transformer::forward_paged with a drafter).
// The LM head (a fifth of a small model's bytes: SmolLM2-135M has 28M of 135M parameters there):
// bf16 by default, the paper's 16-bit head (a bf16 copy made at each refresh); int4 (group 32) or
// the policy's own f32 head on request. docs/METHODS.md has the acceptance and speed of each. refresh() re-quantizes
// from the current weights after every update (what the released code does); with lag = k the copy in use is the one
// quantized k refreshes earlier (the "drafter from k steps before" of the press description, to measure what staleness
// costs). On a device (Transformer::attach_device) the drafter's pass runs there too
// (DeviceModel::forward_paged_draft): the weights are quantized here, in the layout the device reads, and uploaded when
// the copy in use changes (copy_id()).
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <vector>

#include "temper/kernels/int4_matmul.h"

namespace temper {

class Transformer;

enum class DraftHead { bf16, int4, f32 };
// "bf16", "int4" or "f32"; anything else is an error naming `what` (the flag or recipe key).
DraftHead draft_head_named(const std::string& name, const std::string& what);

struct Int4Layer {
  kernels::Int4Weights qkv, o, gu, down;
};

class Int4Drafter {
 public:
  // The int4 head's group: finer than the blocks' (the logits are what acceptance compares).
  static constexpr int64_t kHeadGroup = 32;
  // layout: the int4 weights' layout; unset: for a model with a device attached the device's
  // (DeviceModel::int4_layout: rows for CUDA), else the CPU's preferred one (cols16 with AVX-512 VNNI).
  explicit Int4Drafter(int64_t group = 128, int64_t lag = 0, DraftHead head = DraftHead::bf16,
                       std::optional<kernels::Int4Layout> layout = std::nullopt);
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
  size_t bytes() const;  // of the copy in use

 private:
  struct Copy {
    std::vector<Int4Layer> layers;
    kernels::Int4Weights head;
    std::vector<uint16_t> head16;
    bool head16_packed = false;
    uint64_t id = 0;
  };
  int64_t group_, lag_;
  DraftHead head_;
  std::optional<kernels::Int4Layout> layout_;
  std::deque<Copy> copies_;  // newest at the back, at most lag + 1
};

}  // namespace temper
