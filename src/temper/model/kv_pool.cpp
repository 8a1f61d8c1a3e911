#include "temper/model/kv_pool.h"

#include <algorithm>
#include <cstring>

#include "temper/core/dtype.h"
#include "temper/core/error.h"
#include "temper/core/memory_info.h"
#include "temper/core/thread_pool.h"

namespace temper {

DType kv_dtype(kernels::Precision p) {
  return p == kernels::Precision::bf16 ? DType::bf16 : DType::f32;
}

KvPool::KvPool(const ModelConfig& c, int64_t block_size, int64_t num_blocks, DType dtype)
    : layers_(c.num_layers),
      row_(c.num_kv_heads * c.head_dim),
      block_size_(block_size),
      num_blocks_(num_blocks),
      dtype_(dtype) {
  TEMPER_CHECK(block_size > 0 && num_blocks > 0) << "KV pool: block_size " << block_size << " and num_blocks "
                                                 << num_blocks << " must be positive";
  TEMPER_CHECK(dtype == DType::f32 || dtype == DType::bf16) << "KV pool: rows are f32 or bf16";
  k_ = Tensor::zeros({layers_, num_blocks_, block_size_, row_}, dtype);
  v_ = Tensor::zeros({layers_, num_blocks_, block_size_, row_}, dtype);
  // On transparent huge pages where the system gives them (advised before the first write): decode attention reads
  // blocks scattered over the pool, and with 4 KiB pages their TLB misses cost it (build/bench/paged_attention --huge 0
  // vs 1, a SmolLM2-135M step over 64 x 272 keys: 24.0-25.0 -> 22.3-23.2 ms on Zen 5; docs/PERFORMANCE.md). Blocks
  // are handed out from the lowest id, so each layer's used range grows contiguously: at most one partly used huge
  // page a layer above what the blocks in use need.
  advise_huge_pages(k_.raw(), k_.nbytes());
  advise_huge_pages(v_.raw(), v_.nbytes());
  refs_.assign(static_cast<size_t>(num_blocks_), 0);
  free_.reserve(static_cast<size_t>(num_blocks_));
  copies_.reserve(static_cast<size_t>(num_blocks_));
  for (int64_t b = num_blocks_ - 1; b >= 0; --b) free_.push_back(static_cast<int32_t>(b));
}

int64_t KvPool::blocks_for_budget(const ModelConfig& c, int64_t block_size, size_t bytes, DType dtype) {
  size_t per_block = 2 * static_cast<size_t>(c.num_layers * block_size * c.num_kv_heads * c.head_dim) *
                     (dtype == DType::bf16 ? sizeof(uint16_t) : sizeof(float));
  return static_cast<int64_t>(bytes / per_block);
}

void KvPool::point(kernels::PagedAttnArgs& a, int64_t layer) const {
  if (dtype_ == DType::bf16) {
    a.k_pool16 = k_block16(layer, 0);
    a.v_pool16 = v_block16(layer, 0);
  } else {
    a.k_pool = k_block(layer, 0);
    a.v_pool = v_block(layer, 0);
  }
  a.block_size = block_size_;
}

const float* KvPool::k_block(int64_t layer, int32_t block) const {
  return k_.checked_data<float>(DType::f32) + offset(layer, block);
}
const float* KvPool::v_block(int64_t layer, int32_t block) const {
  return v_.checked_data<float>(DType::f32) + offset(layer, block);
}
const uint16_t* KvPool::k_block16(int64_t layer, int32_t block) const {
  return k_.checked_data<uint16_t>(DType::bf16) + offset(layer, block);
}
const uint16_t* KvPool::v_block16(int64_t layer, int32_t block) const {
  return v_.checked_data<uint16_t>(DType::bf16) + offset(layer, block);
}
int32_t KvPool::block_of(const SeqKv& s, int64_t p) const {
  TEMPER_CHECK(p >= 0 && p / block_size_ < static_cast<int64_t>(s.blocks.size()))
      << "KV pool: position " << p << " outside the sequence's blocks";
  const int32_t b = s.blocks[static_cast<size_t>(p / block_size_)];
  TEMPER_CHECK(b >= 0) << "KV pool: position " << p << " was dropped behind the sliding window";
  return b;
}
const float* KvPool::k_at(int64_t layer, const SeqKv& s, int64_t p) const {
  return k_block(layer, block_of(s, p)) + (p % block_size_) * row_;
}
const float* KvPool::v_at(int64_t layer, const SeqKv& s, int64_t p) const {
  return v_block(layer, block_of(s, p)) + (p % block_size_) * row_;
}
float KvPool::get(const Tensor& t, int64_t at) const {
  return dtype_ == DType::bf16 ? bf16_to_f32(t.data<uint16_t>()[at]) : t.data<float>()[at];
}
float KvPool::k_value(int64_t layer, const SeqKv& s, int64_t p, int64_t e) const {
  return get(k_, offset(layer, block_of(s, p)) + (p % block_size_) * row_ + e);
}
float KvPool::v_value(int64_t layer, const SeqKv& s, int64_t p, int64_t e) const {
  return get(v_, offset(layer, block_of(s, p)) + (p % block_size_) * row_ + e);
}

void KvPool::put_row(Tensor& t, int64_t at, const float* x) {
  if (dtype_ == DType::bf16) {
    kernels::convert_to_bf16(x, t.data<uint16_t>() + at, row_);  // one row: on the calling thread
  } else {
    std::memcpy(t.data<float>() + at, x, static_cast<size_t>(row_) * sizeof(float));
  }
}

void KvPool::copy_block(int32_t from, int32_t to) {
  const size_t elem = dtype_ == DType::bf16 ? sizeof(uint16_t) : sizeof(float);
  const size_t bytes = static_cast<size_t>(block_size_ * row_) * elem;
  for (int64_t l = 0; l < layers_; ++l)
    for (Tensor* t : {&k_, &v_}) {
      char* base = static_cast<char*>(t->raw());
      std::memcpy(base + static_cast<size_t>(offset(l, to)) * elem, base + static_cast<size_t>(offset(l, from)) * elem,
                  bytes);
    }
}

int32_t KvPool::take_block() {
  int32_t b = free_.back();
  free_.pop_back();
  refs_[static_cast<size_t>(b)] = 1;
  return b;
}

void KvPool::drop_block(int32_t b) {
  if (--refs_[static_cast<size_t>(b)] == 0) free_.push_back(b);
}

int64_t KvPool::blocks_needed(const SeqKv& s, int64_t n) const {
  int64_t need_blocks = (s.len + n + block_size_ - 1) / block_size_;
  int64_t have = static_cast<int64_t>(s.blocks.size());
  bool cow = n > 0 && s.len % block_size_ != 0 && refs_[static_cast<size_t>(s.blocks.back())] > 1;
  return (need_blocks > have ? need_blocks - have : 0) + (cow ? 1 : 0);
}

void KvPool::reserve(SeqKv& s, int64_t n) {
  TEMPER_CHECK(n >= 0) << "KV pool: cannot reserve " << n << " tokens";
  int64_t need_blocks = (s.len + n + block_size_ - 1) / block_size_;
  bool cow = n > 0 && s.len % block_size_ != 0 && refs_[static_cast<size_t>(s.blocks.back())] > 1;
  int64_t want = blocks_needed(s, n);
  TEMPER_CHECK(want <= free_blocks()) << "KV pool exhausted: need " << want << " blocks, " << free_blocks()
                                      << " free of " << num_blocks_ << " (raise the KV memory budget or lower the batch)";
  if (cow) {  // the partially filled last block is shared: give s its own copy before writing into it
    int32_t old = s.blocks.back(), mine = take_block();
    copy_block(old, mine);
    if (copies_.size() < copies_.capacity()) {
      copies_.emplace_back(old, mine);
    } else {  // full: nobody drains the log (the CPU alone), unless a device mirrors the blocks
      TEMPER_CHECK(!mirrored_) << "KV pool: more than " << copies_.capacity()
                               << " copy-on-write copies between two forwards of a mirroring device";
    }
    drop_block(old);
    s.blocks.back() = mine;
  }
  while (static_cast<int64_t>(s.blocks.size()) < need_blocks) s.blocks.push_back(take_block());
}

void KvPool::write(int64_t layer, const SeqKv& s, int64_t n, const float* k, const float* v, int64_t stride) {
  TEMPER_CHECK((s.len + n + block_size_ - 1) / block_size_ <= static_cast<int64_t>(s.blocks.size()))
      << "KV pool: write of " << n << " tokens at " << s.len << " without reserve";
  for (int64_t i = 0; i < n; ++i) {
    int64_t p = s.len + i;
    int32_t b = s.blocks[static_cast<size_t>(p / block_size_)];
    put_row(k_, offset(layer, b) + (p % block_size_) * row_, k + i * stride);
    put_row(v_, offset(layer, b) + (p % block_size_) * row_, v + i * stride);
  }
}

void KvPool::write_at(int64_t layer, const int32_t* table, int64_t pos, const float* k, const float* v) {
  int32_t b = table[pos / block_size_];
  put_row(k_, offset(layer, b) + (pos % block_size_) * row_, k);
  put_row(v_, offset(layer, b) + (pos % block_size_) * row_, v);
}

void KvPool::write_rows(int64_t layer, const int32_t* const* tables, const int32_t* pos, int64_t n, const float* k,
                        const float* v, int64_t stride) {
  parallel_for(n, 16, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) write_at(layer, tables[i], pos[i], k + i * stride, v + i * stride);
  });
}

SeqKv KvPool::fork(const SeqKv& s, int64_t at) {
  TEMPER_CHECK(at >= 0 && at <= s.len) << "KV pool: fork at " << at << " outside [0, " << s.len << "]";
  SeqKv f;
  f.len = at;
  int64_t nb = (at + block_size_ - 1) / block_size_;
  for (int64_t i = 0; i < nb; ++i) {
    int32_t b = s.blocks[static_cast<size_t>(i)];
    if (b >= 0) ++refs_[static_cast<size_t>(b)];  // -1: a block dropped behind a sliding window
    f.blocks.push_back(b);
  }
  return f;
}

void KvPool::truncate(SeqKv& s, int64_t len) {
  TEMPER_CHECK(len >= 0 && len <= s.len) << "KV pool: truncate to " << len << " outside [0, " << s.len << "]";
  int64_t nb = (len + block_size_ - 1) / block_size_;
  while (static_cast<int64_t>(s.blocks.size()) > nb) {
    if (s.blocks.back() >= 0) drop_block(s.blocks.back());
    s.blocks.pop_back();
  }
  s.len = len;
}

int64_t KvPool::drop_before(SeqKv& s, int64_t pos) {
  int64_t dropped = 0;
  const int64_t whole = std::min<int64_t>(pos, s.len) / block_size_;  // blocks entirely before pos
  for (int64_t b = 0; b < whole && b < static_cast<int64_t>(s.blocks.size()); ++b) {
    int32_t& id = s.blocks[static_cast<size_t>(b)];
    if (id < 0) continue;
    drop_block(id);
    id = -1;
    ++dropped;
  }
  return dropped;
}

void KvPool::release(SeqKv& s) { truncate(s, 0); }

}  // namespace temper
