// Fills a Transformer's parameters from Hugging Face-named tensors (any float dtype, converted to
// f32). Every parameter must be present with the expected shape; errors name the file and tensor.
// A tied model may carry a redundant lm_head.weight, which is ignored.
#pragma once

#include "temper/io/safetensors.h"
#include "temper/model/transformer.h"

namespace temper::io {

void load_hf_weights(Transformer& model, const SafetensorsFile& file);

}  // namespace temper::io
