// Export of a Transformer (HF-named parameters) as a GGUF v3 file llama.cpp can load: llama.cpp's
// tensor names, the `{arch}.*` hyperparameters its loader reads for llama/qwen2/qwen3, matrices in the
// chosen type (F32, F16, BF16 or Q8_0). Written atomically (core/atomic_file.h).
// Follows llama.cpp convert_hf_to_gguf.py (LlamaModel, Qwen2Model, Qwen3Model). Leaves out: the
// tokenizer (the caller passes tokenizer.ggml.* KVs in `metadata`; llama.cpp needs them to load).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "temper/io/gguf_quant.h"
#include "temper/io/gguf_value.h"
#include "temper/model/transformer.h"

namespace temper::io {

struct GgufExportOptions {
  GgmlType matrix_type = GgmlType::f16;  // 2-D tensors: F32, F16, BF16 or Q8_0
  // Extra KVs written after the model's own (tokenizer.ggml.*, tokenizer.chat_template,
  // general.name, ...). A key the exporter writes itself (general.architecture, general.alignment,
  // general.file_type, general.quantization_version, {arch}.*) is refused.
  std::vector<std::pair<std::string, GgufValue>> metadata;
  uint32_t alignment = 32;
};

// The tensor type a parameter is written as: F32 for 1-D tensors, else matrix_type (F16 when
// matrix_type is Q8_0 and the row length is not a multiple of 32).
GgmlType gguf_export_type(const Shape& shape, GgmlType matrix_type);

// The q/k row permutation is re-applied for arch llama; 1-D tensors (norms, biases) are always F32 and
// matrices in the chosen type (a Q8_0 matrix whose rows are not a multiple of 32 falls back to F16, as
// convert_hf_to_gguf.py does).
void save_gguf_model(const Transformer& model, const std::string& path, const GgufExportOptions& options = {});

}  // namespace temper::io
