#include "temper/model/int4_drafter.h"

#include <atomic>

#include "temper/core/error.h"
#include "temper/kernels/matmul.h"
#include "temper/model/device_model.h"
#include "temper/model/transformer.h"

namespace temper {

DraftHead draft_head_named(const std::string& name, const std::string& what) {
  if (name == "bf16") return DraftHead::bf16;
  if (name == "int4") return DraftHead::int4;
  if (name == "f32") return DraftHead::f32;
  TEMPER_FAIL() << what << " must be bf16, int4 or f32, got '" << name << "'";
}

Int4Drafter::Int4Drafter(int64_t group, int64_t lag, DraftHead head, std::optional<kernels::Int4Layout> layout)
    : group_(group), lag_(lag), head_(head), layout_(layout) {
  TEMPER_CHECK(group >= 32 && group % 32 == 0) << "drafter: group must be a positive multiple of 32, got " << group;
  TEMPER_CHECK(lag >= 0) << "drafter: lag must be >= 0, got " << lag;
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
  const int64_t head_n = c.vocab_size * C;
  if (head_ == DraftHead::int4)
    kernels::quantize_int4(P + model.layout().lm_head, c.vocab_size, C, C, kHeadGroup, &copy.head, layout);
  if (head_ == DraftHead::bf16) {  // packed for our bf16 kernel where the CPU runs it, else row-major
    copy.head16_packed = kernels::packed_supported();
    if (copy.head16_packed) {
      copy.head16.resize(static_cast<size_t>(kernels::packed_size(c.vocab_size, C)));
      kernels::bf16_pack_weight(P + model.layout().lm_head, c.vocab_size, C, copy.head16.data());
    } else {
      copy.head16.resize(static_cast<size_t>(head_n));
      kernels::convert_to_bf16(P + model.layout().lm_head, copy.head16.data(), head_n);
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

size_t Int4Drafter::bytes() const {
  size_t b = 0;
  for (const Int4Layer& l : layers()) b += l.qkv.bytes() + l.o.bytes() + l.gu.bytes() + l.down.bytes();
  return b + copies_.front().head.bytes() + copies_.front().head16.size() * sizeof(uint16_t);
}

}  // namespace temper
