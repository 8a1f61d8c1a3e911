// A Hugging Face model directory: config.json, weights (model.safetensors or sharded with
// model.safetensors.index.json), tokenizer.json / tokenizer_config.json, generation_config.json.
// Reading validates what is there and names the file and field of anything wrong; writing
// (export_hf_dir) produces a directory transformers loads, atomically.
#pragma once

#include <string>
#include <vector>

#include "temper/core/dtype.h"
#include "temper/model/config.h"
#include "temper/model/lora.h"
#include "temper/model/transformer.h"

namespace temper::io {

struct HfModelDir {
  std::string dir;
  ModelConfig config;
  std::vector<int32_t> eos_ids;  // generation_config.json eos_token_id, else config.json's
  int32_t bos_id = -1;
  std::string tokenizer_json;         // path, empty if absent
  std::string tokenizer_config_json;  // path, empty if absent
  bool has_weights = false;
};

bool is_hf_model_dir(const std::string& path);
HfModelDir read_hf_model_dir(const std::string& dir);
// Loads config and weights into a new Transformer; with `held` bf16 / int4 its block products are held as they load
// (Transformer::plan_held_base: the f32 model never whole).
Transformer load_hf_model(const HfModelDir& d, LoraBase held = LoraBase::f32);

struct HfExportOptions {
  DType dtype = DType::f32;  // f32, bf16 or f16 weights
  std::vector<int32_t> eos_ids;
  int32_t bos_id = -1;
  std::string tokenizer_json_text;         // written as tokenizer.json when not empty
  std::string tokenizer_config_json_text;  // written as tokenizer_config.json when not empty
};

// Writes config.json, model.safetensors, generation_config.json and the tokenizer files into
// out_dir (replacing it only once the new directory is complete).
void export_hf_dir(const Transformer& model, const std::string& out_dir, const HfExportOptions& o);

}  // namespace temper::io
