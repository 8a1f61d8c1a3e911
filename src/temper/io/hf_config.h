// Reads a Hugging Face config.json into a ModelConfig (Llama, Qwen2, Qwen3, Mistral, Gemma-2, Gemma-3 text,
// Phi-3 causal LMs; absent fields take the config classes' defaults). Errors name the file, the field and
// what was expected; fields selecting variants not implemented are refused. Other extra keys are ignored.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "temper/model/config.h"

namespace temper::io {

ModelConfig read_hf_config(const std::string& path);
// The config.json fields of `c` as its family's config class spells them (read_hf_config reads them back
// to `c`); the caller adds torch_dtype and the token ids.
nlohmann::ordered_json hf_config_json(const ModelConfig& c);

}  // namespace temper::io
