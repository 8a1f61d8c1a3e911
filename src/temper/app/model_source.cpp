#include "temper/app/model_source.h"

#include <cstdio>

#include <filesystem>

#include <chrono>

#include "temper/core/error.h"
#include "temper/io/gguf_file.h"
#include "temper/io/gguf_model.h"
#include "temper/io/hf_model_dir.h"

namespace temper::app {
namespace fs = std::filesystem;

namespace {

// tokenizer.ggml.* -> TokenizerSpec (llama.cpp's keys).
std::shared_ptr<const text::Tokenizer> gguf_tokenizer(const io::GgufFile& f) {
  if (!f.find("tokenizer.ggml.tokens")) return nullptr;
  text::TokenizerSpec s;
  s.model = f.get_str("tokenizer.ggml.model");
  s.tokens = f.get_str_array("tokenizer.ggml.tokens");
  if (f.find("tokenizer.ggml.merges")) s.add_merge_strings(f.get_str_array("tokenizer.ggml.merges"));
  if (f.find("tokenizer.ggml.scores")) s.scores = f.get_f32_array("tokenizer.ggml.scores");
  if (f.find("tokenizer.ggml.token_type")) s.token_types = f.get_i32_array("tokenizer.ggml.token_type");
  if (f.find("tokenizer.ggml.pre")) s.pre = f.get_str("tokenizer.ggml.pre");
  // llama.cpp's defaults where a key is absent: SentencePiece ("llama") has bos 1, eos 2, unk 0, add_bos.
  const bool spm = s.model == "llama";
  auto id = [&](const char* key, int32_t spm_default) {
    return f.find(key) ? static_cast<int32_t>(f.get_u32(key)) : (spm ? spm_default : -1);
  };
  s.bos_id = id("tokenizer.ggml.bos_token_id", 1);
  s.eos_id = id("tokenizer.ggml.eos_token_id", 2);
  s.unk_id = id("tokenizer.ggml.unknown_token_id", 0);
  s.pad_id = id("tokenizer.ggml.padding_token_id", -1);
  s.add_bos = spm;
  if (f.find("tokenizer.ggml.add_bos_token")) s.add_bos = f.get_bool("tokenizer.ggml.add_bos_token");
  if (f.find("tokenizer.ggml.add_eos_token")) s.add_eos = f.get_bool("tokenizer.ggml.add_eos_token");
  if (f.find("tokenizer.ggml.add_space_prefix")) s.add_space_prefix = f.get_bool("tokenizer.ggml.add_space_prefix");
  if (f.find("tokenizer.chat_template")) s.chat_template = f.get_str("tokenizer.chat_template");
  return std::make_shared<const text::Tokenizer>(text::Tokenizer::from_spec(s));
}

std::shared_ptr<const text::Tokenizer> hf_tokenizer(const std::string& json, const std::string& config) {
  if (json.empty()) return nullptr;
  return std::make_shared<const text::Tokenizer>(text::Tokenizer::from_hf_files(json, config));
}

}  // namespace

bool is_gguf_path(const std::string& path) {
  return path.size() > 5 && path.compare(path.size() - 5, 5, ".gguf") == 0;
}

LoadedModel load_model(const std::string& path, LoraBase held, bool weights) {
  TEMPER_CHECK(fs::exists(path)) << path << ": no such file or directory";
  auto t0 = std::chrono::steady_clock::now();
  LoadedModel lm;
  lm.path = path;
  if (fs::is_regular_file(path) && is_gguf_path(path)) {
    io::GgufFile f = io::GgufFile::open(path);
    lm.model = std::make_unique<Transformer>(io::gguf_model_config(f));
    lm.model->plan_held_base(held);
    if (weights) io::load_gguf_weights(*lm.model, f);
    lm.format = "gguf";
    if (f.find("tokenizer.ggml.eos_token_id")) lm.eos_ids = {static_cast<int32_t>(f.get_u32("tokenizer.ggml.eos_token_id"))};
    if (f.find("tokenizer.ggml.bos_token_id")) lm.bos_id = static_cast<int32_t>(f.get_u32("tokenizer.ggml.bos_token_id"));
    lm.gguf_meta = f.metadata_with_prefix("tokenizer.");
    lm.tokenizer = gguf_tokenizer(f);
    if (f.find("general.name")) lm.gguf_meta.emplace_back("general.name", io::GgufValue::string(f.get_str("general.name")));
    lm.load_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return lm;
  }
  if (io::is_hf_model_dir(path)) {
    io::HfModelDir d = io::read_hf_model_dir(path);
    lm.model =
        weights ? std::make_unique<Transformer>(io::load_hf_model(d, held)) : std::make_unique<Transformer>(d.config);
    lm.format = "hf";
    lm.eos_ids = d.eos_ids;
    lm.bos_id = d.bos_id;
    lm.tokenizer_json = d.tokenizer_json;
    lm.tokenizer_config_json = d.tokenizer_config_json;
    lm.tokenizer = hf_tokenizer(d.tokenizer_json, d.tokenizer_config_json);
    lm.load_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return lm;
  }
  TEMPER_FAIL() << path << ": not a model temper can open (expected a Hugging Face directory with config.json and "
                << "model.safetensors, or a .gguf file)";
}

}  // namespace temper::app

namespace temper::app {

std::shared_ptr<const text::Tokenizer> load_tokenizer(const std::string& path) {
  TEMPER_CHECK(fs::exists(path)) << path << ": no such file or directory";
  std::shared_ptr<const text::Tokenizer> t;
  if (fs::is_regular_file(path) && is_gguf_path(path)) {
    t = gguf_tokenizer(io::GgufFile::open(path));
  } else if (fs::is_directory(path)) {
    fs::path p(path);
    std::string cfg = fs::exists(p / "tokenizer_config.json") ? (p / "tokenizer_config.json").string() : "";
    if (fs::exists(p / "tokenizer.json")) t = hf_tokenizer((p / "tokenizer.json").string(), cfg);
  } else if (path.size() > 5 && path.compare(path.size() - 5, 5, ".json") == 0) {
    t = hf_tokenizer(path, "");
  }
  TEMPER_CHECK(t != nullptr) << path << ": no tokenizer (expected tokenizer.json in a model directory, a "
                             << "tokenizer.json file, or a GGUF with tokenizer.ggml.* metadata)";
  return t;
}

void attach_device(Transformer& model, const std::string& device) {
  std::shared_ptr<DeviceModel> d = make_device_model(model.config(), device);
  if (!d) return;
  model.attach_device(d);
  std::fprintf(stderr, "temper: model on %s: %.2f GiB of weights, gradients and AdamW state (activations and KV "
               "cache are planned at the first step)\n", d->describe().c_str(),
               static_cast<double>(d->memory_bytes()) / (1 << 30));
}

}  // namespace temper::app
