// GGUF reader (versions 2 and 3, little-endian): the file is mmapped; metadata KVs are parsed into
// GgufValues; tensor infos are validated (type, dims, size, alignment, bounds, overlaps) before any
// byte of tensor data is touched; tensors are zero-copy views (raw quantized blocks or plain
// dtypes) or dequantized f32 copies. Every error names the file and the key or tensor, the expected
// and the actual value. Format: ggml docs/gguf.md; checks follow llama.cpp's gguf.cpp.
// Leaves out: big-endian files, GGUF v1, split (multi-file) models.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "temper/core/tensor.h"
#include "temper/io/gguf_quant.h"
#include "temper/io/gguf_value.h"

namespace temper::io {

inline constexpr uint32_t kGgufDefaultAlignment = 32;  // when general.alignment is absent
inline constexpr int kGgufMaxDims = 4;                 // GGML_MAX_DIMS
inline constexpr size_t kGgufMaxNameBytes = 63;        // GGML_MAX_NAME - 1

struct GgufTensorInfo {
  std::string name;
  GgmlType type = GgmlType::f32;
  std::vector<int64_t> ne;  // GGUF order: ne[0] is the fastest (contiguous) dimension
  uint64_t offset = 0;      // from the start of the data section
  uint64_t nbytes = 0;
  Shape shape() const;  // PyTorch row-major order: ne reversed ([rows, cols] for a matrix)
  int64_t numel() const;
};

class GgufFile {
 public:
  static GgufFile open(const std::string& path);

  const std::string& path() const { return path_; }
  uint32_t version() const { return version_; }
  uint32_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }  // start of the data section in the file
  uint64_t file_size() const { return size_; }

  // Metadata in file order.
  const std::vector<std::pair<std::string, GgufValue>>& metadata() const { return kv_; }
  // The KVs whose key starts with `prefix` (e.g. "tokenizer." to carry a tokenizer into an export).
  std::vector<std::pair<std::string, GgufValue>> metadata_with_prefix(const std::string& prefix) const;
  bool has_key(const std::string& key) const { return kv_index_.count(key) != 0; }
  const GgufValue* find(const std::string& key) const;  // null if absent
  const GgufValue& at(const std::string& key) const;    // throws naming the file and the key
  // Typed getters. Integer getters accept any integer type whose value fits (writers differ:
  // llama.cpp writes u32, gguf-py i32 by default); float getters accept f32 and f64. They throw
  // naming the file, the key, the type wanted and the type found (or the value that does not fit).
  uint32_t get_u32(const std::string& key) const;
  int32_t get_i32(const std::string& key) const;
  uint64_t get_u64(const std::string& key) const;
  int64_t get_i64(const std::string& key) const;
  float get_f32(const std::string& key) const;
  double get_f64(const std::string& key) const;
  bool get_bool(const std::string& key) const;
  const std::string& get_str(const std::string& key) const;
  std::vector<std::string> get_str_array(const std::string& key) const;
  std::vector<int32_t> get_i32_array(const std::string& key) const;
  std::vector<float> get_f32_array(const std::string& key) const;
  // The same, with a default for an absent key (a present key of the wrong type still throws).
  uint32_t get_u32_or(const std::string& key, uint32_t fallback) const;
  float get_f32_or(const std::string& key, float fallback) const;

  // Tensors in file order.
  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }
  bool has_tensor(const std::string& name) const { return tensor_index_.count(name) != 0; }
  const GgufTensorInfo* find_tensor(const std::string& name) const;  // null if absent
  const GgufTensorInfo& tensor(const std::string& name) const;       // throws naming file and tensor
  const uint8_t* tensor_data(const GgufTensorInfo& t) const;
  // The raw blocks as rows of ne[0] elements (any type, quantized ones included).
  QuantView quant_view(const std::string& name) const;
  // A zero-copy Tensor (PyTorch shape) for F32, F16, BF16, F64, I32, I64; throws for block types.
  Tensor view(const std::string& name) const;
  // f32 copy in PyTorch shape, for the types ggml_type_dequantizable() accepts; throws otherwise.
  Tensor dequantize(const std::string& name) const;
  // Into dst of n floats (n must equal the tensor's element count).
  void dequantize_into(const std::string& name, float* dst, int64_t n) const;
  // Done with the tensor's bytes (copied into a model): its pages leave the resident memory (file_bytes_release).
  void release(const std::string& name) const;

 private:
  friend class GgufParser;
  std::string path_;
  std::shared_ptr<void> map_;  // keeps the mapping alive while views exist
  bool mapped_ = false;
  const uint8_t* base_ = nullptr;
  uint64_t size_ = 0;
  uint32_t version_ = 0;
  uint32_t alignment_ = kGgufDefaultAlignment;
  uint64_t data_offset_ = 0;
  std::vector<std::pair<std::string, GgufValue>> kv_;
  std::unordered_map<std::string, size_t> kv_index_;
  std::vector<GgufTensorInfo> tensors_;
  std::unordered_map<std::string, size_t> tensor_index_;
};

}  // namespace temper::io
