// `temper convert IN OUT`: between a Hugging Face directory and GGUF (by OUT's extension), with
// the weight dtype of the output (--dtype); --merge-lora DIR merges a PEFT LoRA adapter (a LoRA run's
// checkpoint) into the weights first (W += scale B A). Outputs are written atomically.
#pragma once

#include <string>

namespace temper::app {

struct ConvertOptions {
  std::string in, out;
  std::string dtype;  // HF: f32 (default) | bf16 | f16; GGUF: f16 (default) | f32 | bf16 | q8_0
  bool overwrite = false;  // replace an existing OUT (refused otherwise)
  std::string merge_lora;  // a PEFT adapter directory (a LoRA run's checkpoint) merged into the weights first
};

int convert(const ConvertOptions& o);

}  // namespace temper::app
