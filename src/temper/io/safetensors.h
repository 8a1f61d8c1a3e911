// safetensors reader: the file is mmapped and tensors are zero-copy views into it. The header is
// validated before use (length, JSON, dtype, shape vs byte range, offsets inside the data region);
// every error names the file and the tensor. Format: https://github.com/huggingface/safetensors.
// Leaves out (next issue): sharded checkpoints (index.json), writing.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "temper/core/tensor.h"

namespace temper::io {

class SafetensorsFile {
 public:
  static SafetensorsFile open(const std::string& path);
  const std::string& path() const { return path_; }
  bool has(const std::string& name) const { return tensors_.count(name) != 0; }
  Tensor get(const std::string& name) const;  // a view into the mapping; throws naming the tensor
  // Done with the tensor's bytes (copied into a model): its pages leave the resident memory (file_bytes_release).
  void release(const std::string& name) const;
  std::vector<std::string> names() const;
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

 private:
  std::string path_;
  std::shared_ptr<void> map_;  // keeps the mapping alive while views exist
  bool mapped_ = false;
  std::map<std::string, Tensor> tensors_;
  std::map<std::string, std::string> metadata_;
};

// Copies `src` (f32, f64, bf16 or f16) into f32 `dst` of n elements; throws on a size mismatch.
void copy_to_f32(const Tensor& src, float* dst, int64_t n, const std::string& what);

}  // namespace temper::io
