#include "temper/io/hf_model_dir.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "temper/core/error.h"
#include "temper/io/atomic_file.h"
#include "temper/io/hf_config.h"
#include "temper/io/hf_weights.h"
#include "temper/io/json_file.h"
#include "temper/io/safetensors_set.h"
#include "temper/io/safetensors_writer.h"

namespace temper::io {
namespace fs = std::filesystem;

namespace {

// eos_token_id may be an integer or a list of integers.
std::vector<int32_t> token_ids(const nlohmann::json& j, const char* field, const std::string& path) {
  std::vector<int32_t> out;
  if (!j.contains(field) || j[field].is_null()) return out;
  const auto& v = j[field];
  if (v.is_number_integer()) {
    out.push_back(v.get<int32_t>());
  } else {
    TEMPER_CHECK(v.is_array()) << path << ": field '" << field << "' must be a token id or a list of ids, got " << v.dump();
    for (auto& x : v) {
      TEMPER_CHECK(x.is_number_integer()) << path << ": field '" << field << "' has a non-integer entry " << x.dump();
      out.push_back(x.get<int32_t>());
    }
  }
  return out;
}

}  // namespace

bool is_hf_model_dir(const std::string& path) {
  return fs::is_directory(path) && fs::exists(fs::path(path) / "config.json");
}

HfModelDir read_hf_model_dir(const std::string& dir) {
  fs::path p(dir);
  TEMPER_CHECK(fs::is_directory(p)) << dir << ": not a directory";
  TEMPER_CHECK(fs::exists(p / "config.json")) << dir << ": no config.json (not a Hugging Face model directory)";
  HfModelDir d;
  d.dir = dir;
  std::string cfg_path = (p / "config.json").string();
  d.config = read_hf_config(cfg_path);
  nlohmann::json cfg = read_json_file(cfg_path);
  d.eos_ids = token_ids(cfg, "eos_token_id", cfg_path);
  auto bos = token_ids(cfg, "bos_token_id", cfg_path);
  if (!bos.empty()) d.bos_id = bos[0];
  if (fs::exists(p / "generation_config.json")) {
    std::string gp = (p / "generation_config.json").string();
    nlohmann::json g = read_json_file(gp);
    auto eos = token_ids(g, "eos_token_id", gp);
    if (!eos.empty()) d.eos_ids = eos;
    auto gb = token_ids(g, "bos_token_id", gp);
    if (!gb.empty()) d.bos_id = gb[0];
  }
  for (int32_t id : d.eos_ids)
    TEMPER_CHECK(id >= 0 && id < d.config.vocab_size)
        << dir << ": eos_token_id " << id << " outside the vocabulary [0, " << d.config.vocab_size << ")";
  if (fs::exists(p / "tokenizer.json")) d.tokenizer_json = (p / "tokenizer.json").string();
  if (fs::exists(p / "tokenizer_config.json")) d.tokenizer_config_json = (p / "tokenizer_config.json").string();
  d.has_weights = fs::exists(p / "model.safetensors") || fs::exists(p / "model.safetensors.index.json");
  return d;
}

Transformer load_hf_model(const HfModelDir& d, LoraBase held) {
  TEMPER_CHECK(d.has_weights) << d.dir << ": no model.safetensors or model.safetensors.index.json";
  Transformer m(d.config);
  m.plan_held_base(held);
  load_hf_weights(m, SafetensorsSet::open(d.dir));
  return m;
}

namespace {

std::string hf_config_text(const ModelConfig& c, DType dtype, const HfExportOptions& o) {
  nlohmann::ordered_json j = hf_config_json(c);
  j["torch_dtype"] = dtype == DType::bf16 ? "bfloat16" : dtype == DType::f16 ? "float16" : "float32";
  if (o.bos_id >= 0) j["bos_token_id"] = o.bos_id;
  if (o.eos_ids.size() == 1) j["eos_token_id"] = o.eos_ids[0];
  else if (!o.eos_ids.empty()) j["eos_token_id"] = o.eos_ids;
  j["use_cache"] = true;
  return j.dump(2) + "\n";
}

}  // namespace

void export_hf_dir(const Transformer& model, const std::string& out_dir, const HfExportOptions& o) {
  TEMPER_CHECK(o.dtype == DType::f32 || o.dtype == DType::bf16 || o.dtype == DType::f16)
      << out_dir << ": export dtype must be f32, bf16 or f16, got " << dtype_name(o.dtype);
  write_dir_atomic(out_dir, [&](const std::string& tmp) {
    fs::path t(tmp);
    std::vector<NamedTensor> tensors;
    for (const ParamEntry& e : model.layout().entries()) {
      Tensor v = model.param(e.name);
      tensors.push_back({e.name, o.dtype == DType::f32 ? v.clone() : v.to(o.dtype)});
    }
    write_safetensors((t / "model.safetensors").string(), tensors);
    write_text_atomic((t / "config.json").string(), hf_config_text(model.config(), o.dtype, o));
    nlohmann::ordered_json g = nlohmann::ordered_json::object();
    if (o.bos_id >= 0) g["bos_token_id"] = o.bos_id;
    if (o.eos_ids.size() == 1) g["eos_token_id"] = o.eos_ids[0];
    else if (!o.eos_ids.empty()) g["eos_token_id"] = o.eos_ids;
    write_text_atomic((t / "generation_config.json").string(), g.dump(2) + "\n");
    if (!o.tokenizer_json_text.empty()) write_text_atomic((t / "tokenizer.json").string(), o.tokenizer_json_text);
    if (!o.tokenizer_config_json_text.empty())
      write_text_atomic((t / "tokenizer_config.json").string(), o.tokenizer_config_json_text);
  });
}

}  // namespace temper::io
