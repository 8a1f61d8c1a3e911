#include "temper/io/hf_config.h"

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "temper/core/error.h"
#include "temper/io/json_file.h"

namespace temper::io {

ModelConfig read_hf_config(const std::string& path) {
  nlohmann::json j = read_json_file(path);
  TEMPER_CHECK(j.is_object()) << path << ": must be a JSON object";
  auto req_int = [&](const char* field) -> int64_t {
    TEMPER_CHECK(j.contains(field)) << path << ": missing field '" << field << "'";
    TEMPER_CHECK(j[field].is_number_integer()) << path << ": field '" << field << "' must be an integer, got "
                                               << j[field].dump();
    return j[field].get<int64_t>();
  };
  auto opt_num = [&](const char* field, double dflt) -> double {
    if (!j.contains(field) || j[field].is_null()) return dflt;
    TEMPER_CHECK(j[field].is_number()) << path << ": field '" << field << "' must be a number, got " << j[field].dump();
    return j[field].get<double>();
  };
  auto opt_str = [&](const char* field) -> std::string {
    if (!j.contains(field) || j[field].is_null()) return "";
    TEMPER_CHECK(j[field].is_string()) << path << ": field '" << field << "' must be a string, got " << j[field].dump();
    return j[field].get<std::string>();
  };
  auto opt_bool = [&](const char* field) -> bool {
    if (!j.contains(field) || j[field].is_null()) return false;
    TEMPER_CHECK(j[field].is_boolean()) << path << ": field '" << field << "' must be true or false, got "
                                        << j[field].dump();
    return j[field].get<bool>();
  };
  ModelConfig c;
  std::string arch;
  if (j.contains("architectures")) {
    auto& a = j["architectures"];
    TEMPER_CHECK(a.is_array() && !a.empty() && a[0].is_string())
        << path << ": field 'architectures' must be a list of class names, got " << a.dump();
    arch = a[0].get<std::string>();
  }
  std::string model_type = opt_str("model_type");
  if (arch == "LlamaForCausalLM" || model_type == "llama") {
    c.arch = Arch::llama;
  } else if (arch == "Qwen2ForCausalLM" || model_type == "qwen2") {
    c.arch = Arch::qwen2;
    c.qkv_bias = true;
  } else if (arch == "Qwen3ForCausalLM" || model_type == "qwen3") {
    c.arch = Arch::qwen3;
    c.qk_norm = true;
  } else {
    TEMPER_FAIL() << path << ": field 'architectures' is '" << arch << "' (model_type '" << model_type
                  << "'); supported: LlamaForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM";
  }
  c.vocab_size = req_int("vocab_size");
  c.hidden_size = req_int("hidden_size");
  c.num_layers = req_int("num_hidden_layers");
  c.num_heads = req_int("num_attention_heads");
  c.num_kv_heads = j.contains("num_key_value_heads") && !j["num_key_value_heads"].is_null()
                       ? req_int("num_key_value_heads") : c.num_heads;
  c.intermediate_size = req_int("intermediate_size");
  c.head_dim = j.contains("head_dim") && !j["head_dim"].is_null() ? req_int("head_dim")
                                                                  : (c.num_heads > 0 ? c.hidden_size / c.num_heads : 0);
  if (j.contains("max_position_embeddings")) c.max_position_embeddings = req_int("max_position_embeddings");
  c.rope_theta = opt_num("rope_theta", 10000.0);
  c.rms_norm_eps = opt_num("rms_norm_eps", 1e-6);
  c.tie_word_embeddings = opt_bool("tie_word_embeddings");
  // Variants the model does not implement are refused, not loaded wrongly.
  TEMPER_CHECK(c.arch == Arch::qwen2 || !opt_bool("attention_bias"))
      << path << ": field 'attention_bias' is true (biases on q/k/v/o); expected false for " << arch_name(c.arch);
  TEMPER_CHECK(!opt_bool("mlp_bias")) << path << ": field 'mlp_bias' is true; expected false (MLP without biases)";
  TEMPER_CHECK(!opt_bool("use_sliding_window"))
      << path << ": field 'use_sliding_window' is true; sliding-window attention is not supported (expected false)";
  TEMPER_CHECK(!j.contains("rope_scaling") || j["rope_scaling"].is_null())
      << path << ": field 'rope_scaling' is set (" << j["rope_scaling"].dump() << "); only plain RoPE is supported";
  std::string act = opt_str("hidden_act");
  TEMPER_CHECK(act.empty() || act == "silu") << path << ": field 'hidden_act' is '" << act << "', expected 'silu'";
  c.validate(path);
  return c;
}

}  // namespace temper::io
