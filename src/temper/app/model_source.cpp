#include "temper/app/model_source.h"

#include <filesystem>

#include <chrono>

#include "temper/core/error.h"
#include "temper/io/gguf_file.h"
#include "temper/io/gguf_model.h"
#include "temper/io/hf_model_dir.h"

namespace temper::app {
namespace fs = std::filesystem;

bool is_gguf_path(const std::string& path) {
  return path.size() > 5 && path.compare(path.size() - 5, 5, ".gguf") == 0;
}

LoadedModel load_model(const std::string& path) {
  TEMPER_CHECK(fs::exists(path)) << path << ": no such file or directory";
  auto t0 = std::chrono::steady_clock::now();
  LoadedModel lm;
  lm.path = path;
  if (fs::is_regular_file(path) && is_gguf_path(path)) {
    io::GgufFile f = io::GgufFile::open(path);
    lm.model = std::make_unique<Transformer>(io::gguf_model_config(f));
    io::load_gguf_weights(*lm.model, f);
    lm.format = "gguf";
    if (f.find("tokenizer.ggml.eos_token_id")) lm.eos_ids = {static_cast<int32_t>(f.get_u32("tokenizer.ggml.eos_token_id"))};
    if (f.find("tokenizer.ggml.bos_token_id")) lm.bos_id = static_cast<int32_t>(f.get_u32("tokenizer.ggml.bos_token_id"));
    lm.gguf_meta = f.metadata_with_prefix("tokenizer.");
    if (f.find("general.name")) lm.gguf_meta.emplace_back("general.name", io::GgufValue::string(f.get_str("general.name")));
    lm.load_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return lm;
  }
  if (io::is_hf_model_dir(path)) {
    io::HfModelDir d = io::read_hf_model_dir(path);
    lm.model = std::make_unique<Transformer>(io::load_hf_model(d));
    lm.format = "hf";
    lm.eos_ids = d.eos_ids;
    lm.bos_id = d.bos_id;
    lm.tokenizer_json = d.tokenizer_json;
    lm.tokenizer_config_json = d.tokenizer_config_json;
    lm.load_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return lm;
  }
  TEMPER_FAIL() << path << ": not a model temper can open (expected a Hugging Face directory with config.json and "
                << "model.safetensors, or a .gguf file)";
}

}  // namespace temper::app
