// The KV cache of batched generation (the rollout engine): a pool of fixed-size blocks reserved once from a memory
// budget (per layer K and V, [num_blocks, block_size, Hkv*D] each), and per-sequence block tables with
// reference-counted blocks, so G samples of one prompt share the prompt's blocks (one prefill),
// a sequence can be forked at any position, and the last partial block is copied on write.
// Follows vLLM's PagedAttention block manager (Kwon et al., SOSP'23) and llama.cpp's seq_cp/seq_rm.
// Leaves out: swapping to host memory, eviction policy (the scheduler's).
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "temper/core/tensor.h"
#include "temper/kernels/matmul.h"
#include "temper/kernels/paged_attention.h"
#include "temper/model/config.h"

namespace temper {

struct SeqKv {
  std::vector<int32_t> blocks;  // block table: position p lives in blocks[p / block_size]
  int64_t len = 0;              // tokens written
};

// Positions per KV block in every pool the trainer, evaluation, teachers, `generate` and the benchmarks make.
inline constexpr int64_t kKvBlockSize = 16;

// The rows are f32, or bf16 (half the bytes: decode attention reads every row each step) for a model in
// bf16 precision, whose forward rounds K and V to bf16 anyway (Transformer: the training forward too), so
// the cache holds the same values either way.
class KvPool {
 public:
  // dtype: DType::f32 or DType::bf16 (kv_dtype(precision) gives the one a model's precision needs).
  KvPool(const ModelConfig& c, int64_t block_size, int64_t num_blocks, DType dtype = DType::f32);
  // How many blocks fit in `bytes` (K and V of every layer).
  static int64_t blocks_for_budget(const ModelConfig& c, int64_t block_size, size_t bytes, DType dtype = DType::f32);

  DType dtype() const { return dtype_; }
  int64_t block_size() const { return block_size_; }
  int64_t num_blocks() const { return num_blocks_; }
  int64_t free_blocks() const { return static_cast<int64_t>(free_.size()); }
  int64_t row() const { return row_; }  // Hkv * D floats per token per layer
  int32_t refcount(int32_t block) const { return refs_[static_cast<size_t>(block)]; }

  // Row of position p of sequence s in layer l (K or V), for reading (f32 pools).
  const float* k_at(int64_t layer, const SeqKv& s, int64_t p) const;
  const float* v_at(int64_t layer, const SeqKv& s, int64_t p) const;
  // Element e of that row, in f32 (any dtype).
  float k_value(int64_t layer, const SeqKv& s, int64_t p, int64_t e) const;
  float v_value(int64_t layer, const SeqKv& s, int64_t p, int64_t e) const;
  // A layer's block (f32 pools; the bf16 pool's rows are k_block16 / v_block16).
  const float* k_block(int64_t layer, int32_t block) const;
  const float* v_block(int64_t layer, int32_t block) const;
  const uint16_t* k_block16(int64_t layer, int32_t block) const;
  const uint16_t* v_block16(int64_t layer, int32_t block) const;
  // Points paged attention's cache fields at layer `layer` (its f32 or bf16 rows) and sets the block size.
  void point(kernels::PagedAttnArgs& a, int64_t layer) const;
  // Copies block `from` to block `to` in every layer (K and V).
  void copy_block(int32_t from, int32_t to);

  // Makes room for n more tokens in s: allocates blocks and copies a shared last block before it is
  // written (copy on write). Throws temper::Error when the pool is exhausted (nothing changed then).
  void reserve(SeqKv& s, int64_t n);
  int64_t blocks_needed(const SeqKv& s, int64_t n) const;  // free blocks reserve(s, n) would take
  // Writes token rows (K and V of one layer) at positions s.len .. s.len + n - 1 (after reserve);
  // rows are `stride` floats apart (rounded to nearest even in a bf16 pool). Call advance(s, n) once
  // every layer is written.
  void write(int64_t layer, const SeqKv& s, int64_t n, const float* k, const float* v, int64_t stride);
  // One token's K and V rows at position `pos` of the sequence whose block table is `table`.
  void write_at(int64_t layer, const int32_t* table, int64_t pos, const float* k, const float* v);
  // n tokens' rows (a paged step's: token i at pos[i] of the sequence whose block table is tables[i]; no two at one
  // place), `stride` floats apart, written in parallel.
  void write_rows(int64_t layer, const int32_t* const* tables, const int32_t* pos, int64_t n, const float* k,
                  const float* v, int64_t stride);
  void advance(SeqKv& s, int64_t n) { s.len += n; }

  // Frees s's blocks that hold only positions before `pos` (their table entries become -1): a model whose every
  // layer attends a sliding window never reads them again. The paged kernels skip positions before the window;
  // reading such a position here is an error. Returns the blocks released (shared ones stay for their others).
  int64_t drop_before(SeqKv& s, int64_t pos);
  SeqKv fork(const SeqKv& s, int64_t at);  // a new sequence sharing s's first `at` tokens (-1 entries copied)
  void truncate(SeqKv& s, int64_t len);    // drop positions >= len (releases whole blocks)
  void release(SeqKv& s);                  // frees s's blocks (shared ones stay for their others)
  // The copy-on-write copies made since the last clear, (from, to) block ids: a device that mirrors
  // the pool's blocks replays them (DeviceModel::forward_paged). Capacity reserved: no allocation.
  const std::vector<std::pair<int32_t, int32_t>>& block_copies() const { return copies_; }
  void clear_block_copies() { copies_.clear(); }
  // A device mirrors this pool's blocks: a copy that does not fit the log is then an error, not dropped.
  void set_mirrored() { mirrored_ = true; }

 private:
  int32_t take_block();
  int32_t block_of(const SeqKv& s, int64_t p) const;  // checked: inside the table, not dropped
  void drop_block(int32_t b);
  int64_t offset(int64_t layer, int32_t block) const { return (layer * num_blocks_ + block) * block_size_ * row_; }
  void put_row(Tensor& t, int64_t at, const float* x);  // row_ values at element `at`
  float get(const Tensor& t, int64_t at) const;

  int64_t layers_, row_, block_size_, num_blocks_;
  DType dtype_;
  Tensor k_, v_;  // [L, num_blocks, block_size, row] of dtype_
  std::vector<int32_t> refs_, free_;
  std::vector<std::pair<int32_t, int32_t>> copies_;
  bool mirrored_ = false;
};

// The KV rows a model in this precision caches: bf16 for bf16 (its forward rounds K and V to bf16).
DType kv_dtype(kernels::Precision p);

}  // namespace temper
