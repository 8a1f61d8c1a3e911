// A flat byte encoding for messages between ranks (dist/ all-gathers): little-endian PODs, vectors
// and strings with a 64-bit length. Reader checks every length against what is left.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "temper/core/error.h"

namespace temper {

class ByteWriter {
 public:
  template <class T>
  void put(const T& v) {
    static_assert(std::is_trivially_copyable_v<T>);
    out_.append(reinterpret_cast<const char*>(&v), sizeof(T));
  }
  template <class T>
  void put(const std::vector<T>& v) {
    static_assert(std::is_trivially_copyable_v<T>);
    put<int64_t>(static_cast<int64_t>(v.size()));
    out_.append(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
  }
  void put(const std::string& s) {
    put<int64_t>(static_cast<int64_t>(s.size()));
    out_.append(s);
  }
  std::string& bytes() { return out_; }

 private:
  std::string out_;
};

class ByteReader {
 public:
  explicit ByteReader(const std::string& in) : p_(in.data()), end_(in.data() + in.size()) {}
  explicit ByteReader(const std::string&&) = delete;  // reads in place: the bytes must outlive the reader
  template <class T>
  void get(T& v) {
    static_assert(std::is_trivially_copyable_v<T>);
    need(sizeof(T));
    std::memcpy(&v, p_, sizeof(T));
    p_ += sizeof(T);
  }
  template <class T>
  void get(std::vector<T>& v) {
    int64_t n = 0;
    get(n);
    TEMPER_CHECK(n >= 0) << "byte message: negative length";
    need(static_cast<size_t>(n) * sizeof(T));
    v.resize(static_cast<size_t>(n));
    if (n) std::memcpy(v.data(), p_, static_cast<size_t>(n) * sizeof(T));
    p_ += static_cast<size_t>(n) * sizeof(T);
  }
  void get(std::string& s) {
    int64_t n = 0;
    get(n);
    TEMPER_CHECK(n >= 0) << "byte message: negative length";
    need(static_cast<size_t>(n));
    s.assign(p_, static_cast<size_t>(n));
    p_ += n;
  }
  bool done() const { return p_ == end_; }

 private:
  void need(size_t n) const {
    TEMPER_CHECK(static_cast<size_t>(end_ - p_) >= n) << "byte message: truncated (" << n << " bytes wanted, " << (end_ - p_) << " left)";
  }
  const char* p_;
  const char* end_;
};

}  // namespace temper
