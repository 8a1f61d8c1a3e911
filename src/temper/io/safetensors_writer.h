// Writes a safetensors file (the format transformers and safetensors read): 8-byte header length,
// JSON header with dtype/shape/data_offsets per tensor (sorted by name) and __metadata__, padded
// with spaces to a multiple of 8, then the data. Written atomically (temp, fsync, rename).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "temper/core/tensor.h"

namespace temper::io {

struct NamedTensor {
  std::string name;
  Tensor tensor;  // CPU, f32 / bf16 / f16 / f64 / i32 / i64 / u8, contiguous
};

void write_safetensors(const std::string& path, const std::vector<NamedTensor>& tensors,
                       const std::map<std::string, std::string>& metadata = {{"format", "pt"}});

}  // namespace temper::io
