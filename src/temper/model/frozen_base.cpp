#include "temper/model/frozen_base.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>

#include "temper/core/dtype.h"
#include "temper/core/error.h"
#include "temper/core/fnv1a.h"
#include "temper/core/memory_info.h"
#include "temper/kernels/held_gemv.h"
#include "temper/kernels/weight_panel.h"
#include "temper/model/block_products.h"

namespace temper {

namespace {

// (offset, N, K) of the block products of every layer, by offset.
std::vector<FrozenBase::Weight> held_weights(const ModelConfig& c, const ParamLayout& layout) {
  const auto shapes = block_products(c);
  std::vector<FrozenBase::Weight> ws;
  for (const LayerOffsets& o : layout.layers) {
    const std::array<int64_t, 4> offsets = block_product_offsets(o);
    for (size_t i = 0; i < shapes.size(); ++i) {
      FrozenBase::Weight w;
      w.offset = offsets[i], w.N = shapes[i].first, w.K = shapes[i].second;
      ws.push_back(std::move(w));
    }
  }
  std::sort(ws.begin(), ws.end(), [](const auto& a, const auto& b) { return a.offset < b.offset; });
  return ws;
}

double int4_bytes(int64_t N, int64_t K) {  // quantize_int4's rows layout: q, f32 scales and u8 zeros per group
  const int64_t Kp = (K + kernels::kInt4Chunk - 1) / kernels::kInt4Chunk * kernels::kInt4Chunk;
  const int64_t G = Kp / kernels::int4_group_for(K, FrozenBase::kInt4Group);
  return static_cast<double>(N * Kp / 2 + N * G * 5);
}

double nf4_bytes(int64_t N, int64_t K) {  // quantize_nf4: q and an f32 absmax per block
  const int64_t Kp = (K + kernels::kInt4Chunk - 1) / kernels::kInt4Chunk * kernels::kInt4Chunk;
  return static_cast<double>(N * Kp / 2 + N * (Kp / kernels::nf4_block_for(K)) * 4);
}

// FNV-1a's step over 64-bit words (a byte at a time costs ~1 s per GB; the tail bytes one by one), each buffer's
// length mixed in first so that bytes moved between buffers change the digest.
uint64_t mix_bytes(uint64_t h, const void* data, size_t n) {
  h = (h ^ n) * kFnv1aPrime;
  const auto* p = static_cast<const unsigned char*>(data);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    std::memcpy(&w, p + i, 8);
    h = (h ^ w) * kFnv1aPrime;
    h ^= h >> 29;  // FNV's multiply only moves bits up: fold the high ones down so every word reaches all bits
  }
  for (; i < n; ++i) h = (h ^ p[i]) * kFnv1aPrime;
  return h;
}

}  // namespace

uint64_t FrozenBase::digest() const {
  TEMPER_CHECK(complete()) << "frozen base: digest of a base not wholly taken";
  uint64_t h = mix_bytes(kFnv1aBasis, &format_, sizeof format_);
  if (format_ == LoraBase::bf16) return mix_bytes(h, bf16_.data<uint16_t>(), bf16_.nbytes());
  for (const Weight& w : weights_) {
    if (format_ == LoraBase::nf4) {
      h = mix_bytes(h, w.nf4.q.data(), w.nf4.q.size());
      h = mix_bytes(h, w.nf4.absmax.data(), w.nf4.absmax.size() * sizeof(float));
      continue;
    }
    h = mix_bytes(h, w.q4.q.data(), w.q4.q.size());
    h = mix_bytes(h, w.q4.scale.data(), w.q4.scale.size() * sizeof(float));
    h = mix_bytes(h, w.q4.zero.data(), w.q4.zero.size());
  }
  return h;
}

FrozenBase::FrozenBase(const ModelConfig& cfg, const ParamLayout& layout, const float* params, LoraBase format,
                       int64_t panel_floats)
    : FrozenBase(cfg, layout, format, panel_floats) {
  for (const Weight& w : weights_) take(w.offset, params + w.offset);
}

FrozenBase::FrozenBase(const ModelConfig& cfg, const ParamLayout& layout, LoraBase format, int64_t panel_floats)
    : format_(format), panel_floats_(panel_floats), weights_(held_weights(cfg, layout)), taken_(weights_.size(), 0) {
  TEMPER_CHECK(format == LoraBase::bf16 || format == LoraBase::int4 || format == LoraBase::nf4)
      << "frozen base: the held format must be bf16, int4 or nf4 (f32 is the model's own weights)";
  if (format != LoraBase::bf16) return;
  size_t n = 0;
  for (Weight& w : weights_) {
    w.at16 = n;
    n += static_cast<size_t>(w.N * w.K);
  }
  bf16_ = Tensor::empty({static_cast<int64_t>(n)}, DType::bf16);  // lazily zeroed: pages cost memory as taken
}

void FrozenBase::take(int64_t offset, const float* W) {
  const Weight* found = find(offset);
  TEMPER_CHECK(found) << "frozen base: no held weight at offset " << offset;
  const size_t i = static_cast<size_t>(found - weights_.data());
  TEMPER_CHECK(!taken_[i]) << "frozen base: the weight at offset " << offset << " is held already";
  Weight& w = weights_[i];
  if (format_ == LoraBase::bf16)
    kernels::convert_to_bf16(W, bf16_.data<uint16_t>() + w.at16, w.N * w.K);
  else if (format_ == LoraBase::nf4)
    kernels::quantize_nf4(W, w.N, w.K, w.K, &w.nf4);
  else
    kernels::quantize_int4(W, w.N, w.K, w.K, kInt4Group, &w.q4, kernels::Int4Layout::rows);
  taken_[i] = 1;
  ++taken_count_;
}

bool FrozenBase::taken(int64_t offset) const {
  const Weight* w = find(offset);
  return w && taken_[static_cast<size_t>(w - weights_.data())];
}

const FrozenBase::Weight* FrozenBase::find(int64_t offset) const {
  auto it = std::lower_bound(weights_.begin(), weights_.end(), offset,
                             [](const Weight& w, int64_t o) { return w.offset < o; });
  return it != weights_.end() && it->offset == offset ? &*it : nullptr;
}

const FrozenBase::Weight& FrozenBase::at(int64_t offset) const {
  const Weight* w = find(offset);
  TEMPER_CHECK(w) << "frozen base: no held weight at offset " << offset;
  TEMPER_CHECK(complete()) << "frozen base: " << weights_.size() - taken_count_
                           << " weight(s) not taken yet (the base is still loading)";
  return *w;
}

const FrozenBase::Weight* FrozenBase::containing(int64_t offset) const {
  auto it = std::upper_bound(weights_.begin(), weights_.end(), offset,
                             [](int64_t o, const Weight& w) { return o < w.offset; });
  if (it == weights_.begin()) return nullptr;
  --it;
  return offset < it->offset + it->N * it->K ? &*it : nullptr;
}

bool FrozenBase::covers(int64_t offset, int64_t n) const {
  const Weight* w = containing(offset);
  return w && offset + n <= w->offset + w->N * w->K;
}

int64_t FrozenBase::panel_rows(const Weight& w) const {
  return std::min(w.N, std::max<int64_t>(16, panel_floats_ / w.K));
}

// The calling thread's panel (sized at its first use, kept for the thread's life): the held values stay read-only.
const float* FrozenBase::panel(const Weight& w, int64_t r0, int64_t r1) const {
  thread_local std::vector<float> scratch;
  const size_t need = static_cast<size_t>(panel_rows(w) * w.K);
  if (scratch.size() < need) scratch.resize(need);
  rows_to_f32(w, r0, r1, scratch.data());
  return scratch.data();
}

void FrozenBase::forward(int64_t offset, int64_t M, const float* x, int64_t ldx, float beta, float* y, int64_t ldy,
                         kernels::Precision p) const {
  const Weight& w = at(offset);
  if (M == 0) return;
  if (M <= kernels::held_gemv_max_rows() && (beta == 0.f || beta == 1.f)) {  // decode: no panel
    kernels::HeldWeight h{w.N, w.K, format_ == LoraBase::bf16 ? bf16_.data<uint16_t>() + w.at16 : nullptr,
                          format_ == LoraBase::int4 ? &w.q4 : nullptr, format_ == LoraBase::nf4 ? &w.nf4 : nullptr};
    kernels::held_gemv(h, M, x, ldx, beta != 0.f, y, ldy, p);
    return;
  }
  forward_panels(offset, M, x, ldx, beta, y, ldy, p);
}

void FrozenBase::forward_panels(int64_t offset, int64_t M, const float* x, int64_t ldx, float beta, float* y,
                                int64_t ldy, kernels::Precision p) const {
  const Weight& w = at(offset);
  if (M == 0) return;
  const int64_t P = panel_rows(w);
  for (int64_t r0 = 0; r0 < w.N; r0 += P) {
    const int64_t r1 = std::min(w.N, r0 + P);
    kernels::gemm(false, true, M, r1 - r0, w.K, x, ldx, panel(w, r0, r1), w.K, beta, y + r0, ldy, p);
  }
}

void FrozenBase::backward_input(int64_t offset, int64_t M, const float* dy, int64_t ldy, float beta, float* dx,
                                int64_t ldx, kernels::Precision p) const {
  const Weight& w = at(offset);
  if (M == 0) return;
  const int64_t P = panel_rows(w);
  for (int64_t r0 = 0; r0 < w.N; r0 += P) {  // dx += dy[:, r0:r1] W[r0:r1, :]
    const int64_t r1 = std::min(w.N, r0 + P);
    kernels::gemm(false, false, M, w.K, r1 - r0, dy + r0, ldy, panel(w, r0, r1), w.K, r0 == 0 ? beta : 1.f, dx, ldx, p);
  }
}

void FrozenBase::dequantize(int64_t offset, float* W) const {
  const Weight& w = at(offset);
  rows_to_f32(w, 0, w.N, W);
}

void FrozenBase::rows_to_f32(const Weight& w, int64_t r0, int64_t r1, float* out) const {
  if (format_ == LoraBase::int4)
    kernels::int4_rows_to_f32(w.q4, r0, r1, out);
  else if (format_ == LoraBase::nf4)
    kernels::nf4_rows_to_f32(w.nf4, r0, r1, out);
  else
    kernels::bf16_rows_to_f32(bf16_.data<uint16_t>() + w.at16, w.K, r0, r1, out);
}

void FrozenBase::dequantize_into(float* params) const {
  for (const Weight& w : weights_) dequantize(w.offset, params + w.offset);
}

void FrozenBase::release_in(float* flat) const {
  for (const Weight& w : weights_) release_in(flat, w.offset);
}

void FrozenBase::release_in(float* flat, int64_t offset) const {
  const Weight* w = find(offset);
  TEMPER_CHECK(w) << "frozen base: no held weight at offset " << offset;
  zero_and_release(flat + w->offset, static_cast<size_t>(w->N * w->K) * sizeof(float));
}

size_t FrozenBase::bytes() const {
  if (format_ == LoraBase::bf16) return bf16_.nbytes();
  size_t b = 0;
  for (const Weight& w : weights_) b += format_ == LoraBase::nf4 ? w.nf4.bytes() : w.q4.bytes();
  return b;
}

int64_t FrozenBase::params_for(const ModelConfig& c) {
  int64_t per_layer = 0;
  for (auto [N, K] : block_products(c)) per_layer += N * K;
  return c.num_layers * per_layer;
}

double FrozenBase::bytes_for(const ModelConfig& c, LoraBase format) {
  if (format == LoraBase::f32) return 0;
  if (format == LoraBase::bf16) return 2.0 * static_cast<double>(params_for(c));
  double (*bytes)(int64_t, int64_t) = format == LoraBase::nf4 ? nf4_bytes : int4_bytes;
  double per_layer = 0;
  for (auto [N, K] : block_products(c)) per_layer += bytes(N, K);
  return static_cast<double>(c.num_layers) * per_layer;
}

}  // namespace temper
