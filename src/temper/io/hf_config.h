// Reads a Hugging Face config.json into a ModelConfig (architectures LlamaForCausalLM,
// Qwen2ForCausalLM, Qwen3ForCausalLM; SmolLM is Llama with tied embeddings). Errors name the file,
// the field and what was expected. Unknown extra keys are ignored, as transformers does.
#pragma once

#include <string>

#include "temper/model/config.h"

namespace temper::io {

ModelConfig read_hf_config(const std::string& path);

}  // namespace temper::io
