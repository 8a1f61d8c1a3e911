// GGUF v3 writer: metadata KVs, tensor infos and data, little-endian, each tensor at an aligned
// offset (general.alignment, written as u32). Tensors come from f32 values encoded at write time
// (F32, F16, BF16, Q8_0), from a callback that fills f32 values, or from already-encoded bytes; the
// data is streamed tensor by tensor, so a model is never held twice in memory. The file is written
// atomically (core/atomic_file.h): PATH.tmp.PID.N, fsync, rename to PATH, fsync of the directory.
// Follows the GGUF spec (ggml docs/gguf.md) and gguf-py's GGUFWriter layout.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "temper/core/tensor.h"
#include "temper/io/gguf_file.h"
#include "temper/io/gguf_quant.h"
#include "temper/io/gguf_value.h"

namespace temper::io {

class GgufWriter {
 public:
  explicit GgufWriter(uint32_t alignment = kGgufDefaultAlignment);  // a power of two

  // Throws on an empty or duplicate key. 'general.alignment', if given, must be the u32 alignment.
  void add_kv(const std::string& key, GgufValue value);
  bool has_kv(const std::string& key) const;

  // `shape` is in PyTorch order (the file stores it reversed); its last dim must be a multiple of
  // the type's block size. Names are unique, 1-63 bytes. `data` (numel floats) must stay valid
  // until write(); it is encoded as `type` (F32, F16, BF16 or Q8_0) while writing.
  void add_tensor(const std::string& name, const Shape& shape, GgmlType type, const float* data);
  // `fill(dst)` writes the numel f32 values into a temporary buffer when the tensor is written.
  void add_tensor(const std::string& name, const Shape& shape, GgmlType type, std::function<void(float*)> fill);
  // Already-encoded bytes of any ggml type (ggml_row_bytes(type, shape[-1]) per row), kept by pointer.
  void add_tensor_raw(const std::string& name, const Shape& shape, GgmlType type, const void* bytes);

  size_t num_tensors() const { return tensors_.size(); }
  void write(const std::string& path) const;

 private:
  struct Entry {
    std::string name;
    Shape shape;
    GgmlType type;
    uint64_t nbytes = 0;
    const float* f32 = nullptr;
    std::function<void(float*)> fill;
    const void* raw = nullptr;
  };
  Entry& add_entry(const std::string& name, const Shape& shape, GgmlType type);

  uint32_t alignment_;
  std::vector<std::pair<std::string, GgufValue>> kv_;
  std::vector<Entry> tensors_;
};

}  // namespace temper::io
