// Opening the model a user names on the command line: a Hugging Face directory or a GGUF file.
// Returns the transformer plus what generation and export need (special token ids, the tokenizer
// files or GGUF tokenizer metadata, origin).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "temper/io/gguf_value.h"
#include "temper/model/lora.h"
#include "temper/model/transformer.h"
#include "temper/text/tokenizer.h"

namespace temper::app {

struct LoadedModel {
  std::unique_ptr<Transformer> model;
  std::string path;
  std::string format;  // "hf" or "gguf"
  std::vector<int32_t> eos_ids;
  int32_t bos_id = -1;
  std::string tokenizer_json, tokenizer_config_json;  // HF tokenizer files (paths), when present
  std::vector<std::pair<std::string, io::GgufValue>> gguf_meta;  // GGUF: tokenizer.* and general.name
  std::shared_ptr<const text::Tokenizer> tokenizer;  // null when the model carries none
  double load_seconds = 0;
};

bool is_gguf_path(const std::string& path);

// held: bf16 / int4 / nf4 holds the block products in that format as they load (Transformer::plan_held_base; LoRA's
// [lora] base): the f32 model never exists whole. f32: the model as the file has it.
// weights = false: the model's structure, tokenizer and metadata only, its parameters left 0 (an [rl.async] explorer
// process, sent every parameter by its trainer).
LoadedModel load_model(const std::string& path, LoraBase held = LoraBase::f32, bool weights = true);
// Only the tokenizer (fast: no weights are read). Throws naming the file when there is none.
std::shared_ptr<const text::Tokenizer> load_tokenizer(const std::string& path);

// --device / model.device: "cpu" leaves the model on the CPU; "cuda[:N]" attaches its GPU copy and
// prints what it holds there (errors name the device and what is accepted).
void attach_device(Transformer& model, const std::string& device);

}  // namespace temper::app
