#include "temper/model/int4_drafter.h"

#include <algorithm>
#include <atomic>
#include <numeric>

#include "temper/core/error.h"
#include "temper/kernels/matmul.h"
#include "temper/model/device_model.h"
#include "temper/model/transformer.h"

namespace temper {

DraftHead draft_head_named(const std::string& name, const std::string& what) {
  if (std::optional<DraftHead> h = enum_from_name(kDraftHeadNames, name)) return *h;
  TEMPER_FAIL() << what << " must be bf16, int4 or f32, got '" << name << "'";
}

Int4Drafter::Int4Drafter(int64_t group, int64_t lag, DraftHead head, std::optional<kernels::Int4Layout> layout)
    : group_(group), lag_(lag), head_(head), layout_(layout) {
  TEMPER_CHECK(group >= 32 && group % 32 == 0) << "drafter: group must be a positive multiple of 32, got " << group;
  TEMPER_CHECK(lag >= 0) << "drafter: lag must be >= 0, got " << lag;
}

void Int4Drafter::set_vocab(int64_t k) {
  TEMPER_CHECK(k >= 0) << "drafter: the vocabulary subset must be >= 0 tokens (0: all), got " << k;
  TEMPER_CHECK(k == 0 || head_ != DraftHead::f32)
      << "drafter: a vocabulary subset needs a bf16 or int4 head (the f32 head is the policy's own, all of it)";
  vocab_ = k;
}

void Int4Drafter::observe(const std::vector<int32_t>& tokens) {
  for (int32_t t : tokens) {
    if (t < 0) continue;
    if (static_cast<size_t>(t) >= counts_.size()) counts_.resize(static_cast<size_t>(t) + 1, 0);
    ++counts_[static_cast<size_t>(t)];
  }
}

std::vector<int32_t> draft_vocabulary(const std::vector<uint64_t>& counts, int64_t v, int64_t k) {
  TEMPER_CHECK(v > 0 && k > 0) << "draft_vocabulary: empty vocabulary or subset";
  k = std::min(k, v);
  std::vector<int32_t> ids(static_cast<size_t>(v));
  std::iota(ids.begin(), ids.end(), 0);
  auto count = [&](int32_t t) { return static_cast<size_t>(t) < counts.size() ? counts[static_cast<size_t>(t)] : 0; };
  std::partial_sort(ids.begin(), ids.begin() + k, ids.end(), [&](int32_t a, int32_t b) {
    const uint64_t ca = count(a), cb = count(b);
    return ca != cb ? ca > cb : a < b;
  });
  ids.resize(static_cast<size_t>(k));
  std::sort(ids.begin(), ids.end());
  return ids;
}

void Int4Drafter::refresh(const Transformer& model) {
  const ModelConfig& c = model.config();
  const int64_t C = c.hidden_size, Hq = c.num_heads * c.head_dim, QKV = c.qkv_dim(), F = c.intermediate_size;
  Copy copy;
  if (copies_.size() > static_cast<size_t>(lag_)) {  // reuse the oldest copy's buffers
    copy = std::move(copies_.front());
    copies_.pop_front();
  }
  std::vector<Int4Layer>& layers = copy.layers;
  layers.resize(static_cast<size_t>(c.num_layers));
  const float* P = model.params();
  const kernels::Int4Layout layout = layout_          ? *layout_
                                     : model.device() ? model.device()->int4_layout()
                                                      : kernels::int4_preferred_layout();
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const LayerOffsets& o = model.layout().layers[static_cast<size_t>(l)];
    Int4Layer& q = layers[static_cast<size_t>(l)];
    kernels::quantize_int4(P + o.w_qkv, QKV, C, C, group_, &q.qkv, layout);
    kernels::quantize_int4(P + o.w_o, C, Hq, Hq, group_, &q.o, layout);
    kernels::quantize_int4(P + o.w_gu, 2 * F, C, C, group_, &q.gu, layout);
    kernels::quantize_int4(P + o.w_down, C, F, F, group_, &q.down, layout);
  }
  // The head's rows: all, or the subset's gathered.
  const float* head = P + model.layout().lm_head;
  int64_t rows = c.vocab_size;
  std::vector<float> gathered;
  copy.ids.clear();
  if (vocab_ > 0 && vocab_ < c.vocab_size) {
    copy.ids = draft_vocabulary(counts_, c.vocab_size, vocab_);
    rows = static_cast<int64_t>(copy.ids.size());
    gathered.resize(static_cast<size_t>(rows * C));
    for (int64_t r = 0; r < rows; ++r)
      std::copy_n(head + static_cast<int64_t>(copy.ids[static_cast<size_t>(r)]) * C, C, gathered.data() + r * C);
    head = gathered.data();
  }
  const int64_t head_n = rows * C;
  if (head_ == DraftHead::int4) kernels::quantize_int4(head, rows, C, C, kHeadGroup, &copy.head, layout);
  copy.head16.clear();
  copy.head16_packed = false;
  // A device with its own bf16 copy of the policy's head drafts with that over the whole vocabulary: no host copy to
  // make. A subset's rows it takes from here, row-major.
  const bool host_reads = !model.device() || model.device()->reads_draft_head_bf16();
  if (head_ == DraftHead::bf16 && (host_reads || !copy.ids.empty())) {
    // packed for our bf16 kernel where the CPU runs it, else row-major
    copy.head16_packed = host_reads && kernels::packed_supported();
    if (copy.head16_packed) {
      copy.head16.resize(static_cast<size_t>(kernels::packed_size(rows, C)));
      kernels::bf16_pack_weight(head, rows, C, copy.head16.data());
    } else {
      copy.head16.resize(static_cast<size_t>(head_n));
      kernels::convert_to_bf16(head, copy.head16.data(), head_n);
    }
  }
  static std::atomic<uint64_t> quantizations{0};  // ids unique in the process: a device's upload cache key
  copy.id = ++quantizations;
  copies_.push_back(std::move(copy));
}

uint64_t Int4Drafter::copy_id() const {
  TEMPER_CHECK(!copies_.empty()) << "drafter: used before the first refresh";
  return copies_.front().id;
}

const std::vector<Int4Layer>& Int4Drafter::layers() const {
  TEMPER_CHECK(!copies_.empty()) << "drafter: used before the first refresh";
  return copies_.front().layers;
}

const kernels::Int4Weights* Int4Drafter::head_int4() const {
  TEMPER_CHECK(!copies_.empty()) << "drafter: used before the first refresh";
  return head_ == DraftHead::int4 ? &copies_.front().head : nullptr;
}

const uint16_t* Int4Drafter::head_bf16() const {
  TEMPER_CHECK(!copies_.empty()) << "drafter: used before the first refresh";
  return head_ == DraftHead::bf16 ? copies_.front().head16.data() : nullptr;
}

bool Int4Drafter::head_bf16_packed() const {
  TEMPER_CHECK(!copies_.empty()) << "drafter: used before the first refresh";
  return copies_.front().head16_packed;
}

const std::vector<int32_t>& Int4Drafter::vocab_ids() const {
  TEMPER_CHECK(!copies_.empty()) << "drafter: used before the first refresh";
  return copies_.front().ids;
}

double vocabulary_coverage(const std::vector<int32_t>& ids, const std::vector<int32_t>& tokens) {
  if (ids.empty() || tokens.empty()) return 1.0;
  size_t hit = 0;
  for (int32_t t : tokens) hit += std::binary_search(ids.begin(), ids.end(), t);
  return static_cast<double>(hit) / static_cast<double>(tokens.size());
}

double Int4Drafter::vocab_coverage(const std::vector<int32_t>& tokens) const {
  return copies_.empty() ? 1.0 : vocabulary_coverage(copies_.front().ids, tokens);
}

size_t Int4Drafter::bytes() const {
  size_t b = 0;
  for (const Int4Layer& l : layers()) b += l.qkv.bytes() + l.o.bytes() + l.gu.bytes() + l.down.bytes();
  return b + copies_.front().head.bytes() + copies_.front().head16.size() * sizeof(uint16_t);
}

}  // namespace temper
