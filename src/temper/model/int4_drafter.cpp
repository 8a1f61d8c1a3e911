#include "temper/model/int4_drafter.h"

#include <chrono>

#include "temper/core/error.h"
#include "temper/model/transformer.h"

namespace temper {

Int4Drafter::Int4Drafter(int64_t group, int64_t lag) : group_(group), lag_(lag) {
  TEMPER_CHECK(group >= 32 && group % 32 == 0) << "drafter: group must be a positive multiple of 32, got " << group;
  TEMPER_CHECK(lag >= 0) << "drafter: lag must be >= 0, got " << lag;
}

void Int4Drafter::refresh(const Transformer& model) {
  auto t0 = std::chrono::steady_clock::now();
  const ModelConfig& c = model.config();
  const int64_t C = c.hidden_size, Hq = c.num_heads * c.head_dim, QKV = c.qkv_dim(), F = c.intermediate_size;
  std::vector<Int4Layer> layers(static_cast<size_t>(c.num_layers));
  if (copies_.size() > static_cast<size_t>(lag_)) {  // reuse the oldest copy's buffers
    layers = std::move(copies_.front());
    copies_.pop_front();
  }
  const float* P = model.params();
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const LayerOffsets& o = model.layout().layers[static_cast<size_t>(l)];
    Int4Layer& q = layers[static_cast<size_t>(l)];
    kernels::quantize_int4(P + o.w_qkv, QKV, C, C, group_, &q.qkv);
    kernels::quantize_int4(P + o.w_o, C, Hq, Hq, group_, &q.o);
    kernels::quantize_int4(P + o.w_gu, 2 * F, C, C, group_, &q.gu);
    kernels::quantize_int4(P + o.w_down, C, F, F, group_, &q.down);
  }
  copies_.push_back(std::move(layers));
  ++refreshes_;
  last_s_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

const std::vector<Int4Layer>& Int4Drafter::layers() const {
  TEMPER_CHECK(!copies_.empty()) << "drafter: used before the first refresh";
  return copies_.front();
}

size_t Int4Drafter::bytes() const {
  size_t b = 0;
  for (const Int4Layer& l : layers()) b += l.qkv.bytes() + l.o.bytes() + l.gu.bytes() + l.down.bytes();
  return b;
}

}  // namespace temper
