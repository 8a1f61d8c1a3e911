// Opening the model a user names on the command line: a Hugging Face directory (or its
// config.json alone, for shapes without weights) today; a GGUF file joins through io/gguf.
// Returns the transformer plus what generation and export need (special token ids, origin).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "temper/model/transformer.h"

namespace temper::app {

struct LoadedModel {
  std::unique_ptr<Transformer> model;
  std::string path;
  std::string format;  // "hf" or "gguf"
  std::vector<int32_t> eos_ids;
  int32_t bos_id = -1;
  std::string tokenizer_json, tokenizer_config_json;  // HF tokenizer files (paths), when present
};

LoadedModel load_model(const std::string& path);

}  // namespace temper::app
