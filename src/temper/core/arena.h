// Scratch arena: one aligned buffer reserved once from the worst-case plan, handed out by bumping an
// offset. Planning runs the same allocation sequence with a null buffer to measure the size.
// Leaves out: freeing single blocks (reset() frees everything after a mark).
#pragma once

#include <cstddef>
#include <cstdint>

#include "temper/core/error.h"
#include "temper/core/tensor.h"

namespace temper {

class Arena {
 public:
  Arena() = default;
  explicit Arena(size_t bytes) { reserve(bytes); }
  ~Arena() { release(); }
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;
  // Moving keeps the buffer (pointers into it stay valid) and empties the source.
  Arena(Arena&& o) noexcept : base_(o.base_), cap_(o.cap_), used_(o.used_), peak_(o.peak_) {
    o.base_ = nullptr;
    o.cap_ = o.used_ = o.peak_ = 0;
  }
  Arena& operator=(Arena&& o) noexcept {
    if (this != &o) {
      release();
      base_ = o.base_;
      cap_ = o.cap_;
      used_ = o.used_;
      peak_ = o.peak_;
      o.base_ = nullptr;
      o.cap_ = o.used_ = o.peak_ = 0;
    }
    return *this;
  }

  void reserve(size_t bytes);
  void release();
  template <class T>
  T* alloc(int64_t n) {
    return static_cast<T*>(alloc_bytes(static_cast<size_t>(n) * sizeof(T)));
  }
  void* alloc_bytes(size_t bytes);
  size_t mark() const { return used_; }
  void reset(size_t mark = 0) { used_ = mark; }
  size_t used() const { return used_; }
  size_t peak() const { return peak_; }
  size_t capacity() const { return cap_; }

 private:
  char* base_ = nullptr;
  size_t cap_ = 0, used_ = 0, peak_ = 0;
};

}  // namespace temper
