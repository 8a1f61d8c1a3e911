// Fills a Transformer's parameters from Hugging Face-named tensors (any float dtype, converted to
// f32). Every parameter must be present with the expected shape; errors name the file and tensor.
// A tied model may carry a redundant lm_head.weight, which is ignored; any other tensor that is not
// a parameter is an error (a different model) unless `extra` says to ignore it (files that carry
// more than weights, like the test goldens). Each tensor's file pages are given back once it is copied, and the
// model told (Transformer::params_written: a base planned to be held takes each product as it completes), so the
// load holds neither the file whole nor, with a held base, the f32 model whole.
#pragma once

#include "temper/io/safetensors_set.h"
#include "temper/model/transformer.h"

namespace temper::io {

enum class ExtraTensors { error, ignore };

void load_hf_weights(Transformer& model, const SafetensorsSet& file, ExtraTensors extra = ExtraTensors::error);

}  // namespace temper::io
