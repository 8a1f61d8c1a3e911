#include "temper/app/model_source.h"

#include <filesystem>

#include "temper/core/error.h"
#include "temper/io/hf_model_dir.h"

namespace temper::app {
namespace fs = std::filesystem;

LoadedModel load_model(const std::string& path) {
  TEMPER_CHECK(fs::exists(path)) << path << ": no such file or directory";
  LoadedModel lm;
  lm.path = path;
  if (io::is_hf_model_dir(path)) {
    io::HfModelDir d = io::read_hf_model_dir(path);
    lm.model = std::make_unique<Transformer>(io::load_hf_model(d));
    lm.format = "hf";
    lm.eos_ids = d.eos_ids;
    lm.bos_id = d.bos_id;
    lm.tokenizer_json = d.tokenizer_json;
    lm.tokenizer_config_json = d.tokenizer_config_json;
    return lm;
  }
  TEMPER_FAIL() << path << ": not a model temper can open (expected a Hugging Face directory with config.json and "
                << "model.safetensors, or a .gguf file)";
}

}  // namespace temper::app
