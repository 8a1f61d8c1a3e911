#include "temper/io/hf_config.h"

#include <cmath>
#include <nlohmann/json.hpp>
#include <sstream>

#include "temper/core/error.h"
#include "temper/io/json_file.h"

namespace temper::io {

namespace {

using nlohmann::json;

// Typed reads of config.json's fields, each error naming the file and the field.
struct Fields {
  const std::string& path;
  const json& j;

  bool has(const char* f) const { return j.contains(f) && !j[f].is_null(); }
  int64_t req_int(const char* f) const {
    TEMPER_CHECK(j.contains(f)) << path << ": missing field '" << f << "'";
    TEMPER_CHECK(j[f].is_number_integer()) << path << ": field '" << f << "' must be an integer, got " << j[f].dump();
    return j[f].get<int64_t>();
  }
  int64_t opt_int(const char* f, int64_t dflt) const { return has(f) ? req_int(f) : dflt; }
  double opt_num(const char* f, double dflt) const {
    if (!has(f)) return dflt;
    TEMPER_CHECK(j[f].is_number()) << path << ": field '" << f << "' must be a number, got " << j[f].dump();
    return j[f].get<double>();
  }
  // A number, null (0: off) or absent (the class default).
  double num_or_null(const char* f, double dflt) const {
    if (!j.contains(f)) return dflt;
    return j[f].is_null() ? 0.0 : opt_num(f, dflt);
  }
  std::string opt_str(const char* f) const {
    if (!has(f)) return "";
    TEMPER_CHECK(j[f].is_string()) << path << ": field '" << f << "' must be a string, got " << j[f].dump();
    return j[f].get<std::string>();
  }
  bool opt_bool(const char* f, bool dflt = false) const {
    if (!has(f)) return dflt;
    TEMPER_CHECK(j[f].is_boolean()) << path << ": field '" << f << "' must be true or false, got " << j[f].dump();
    return j[f].get<bool>();
  }
};

// architectures[0] / model_type -> the family and what it implies.
Arch read_arch(const Fields& f) {
  std::string cls;
  if (f.j.contains("architectures")) {
    const json& a = f.j["architectures"];
    TEMPER_CHECK(a.is_array() && !a.empty() && a[0].is_string())
        << f.path << ": field 'architectures' must be a list of class names, got " << a.dump();
    cls = a[0].get<std::string>();
  }
  const std::string type = f.opt_str("model_type");
  struct Known {
    const char* cls;
    const char* type;
    Arch arch;
  };
  static const Known known[] = {
      {"LlamaForCausalLM", "llama", Arch::llama},    {"Qwen2ForCausalLM", "qwen2", Arch::qwen2},
      {"Qwen3ForCausalLM", "qwen3", Arch::qwen3},    {"MistralForCausalLM", "mistral", Arch::mistral},
      {"Gemma2ForCausalLM", "gemma2", Arch::gemma2}, {"Gemma3ForCausalLM", "gemma3_text", Arch::gemma3},
      {"Phi3ForCausalLM", "phi3", Arch::phi3},
  };
  for (const Known& k : known)
    if (cls == k.cls || (cls.empty() && type == k.type)) return k.arch;
  for (const Known& k : known)
    if (type == k.type) return k.arch;
  TEMPER_CHECK(type != "gemma3")
      << f.path << ": model_type 'gemma3' (" << cls
      << ") is Gemma-3's image-text model; temper trains the text model (Gemma3ForCausalLM, model_type 'gemma3_text', "
         "as gemma-3-1b ships)";
  TEMPER_FAIL() << f.path << ": field 'architectures' is '" << cls << "' (model_type '" << type
                << "'); supported: LlamaForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM, MistralForCausalLM, "
                   "Gemma2ForCausalLM, Gemma3ForCausalLM, Phi3ForCausalLM";
}

// rope_scaling: null, or linear / llama3 / longrope (HF's rope_type, or the older key type; Phi-3's "su" is
// longrope). Anything else is refused with the type named.
kernels::RopeScaling read_rope_scaling(const Fields& f, const ModelConfig& c) {
  kernels::RopeScaling r;
  if (!f.has("rope_scaling")) return r;
  const json& rs = f.j["rope_scaling"];
  const std::string where = f.path + ": field 'rope_scaling'";
  TEMPER_CHECK(rs.is_object()) << where << " must be an object or null, got " << rs.dump();
  const Fields g{f.path, rs};
  std::string type = g.opt_str("rope_type");
  if (type.empty()) type = g.opt_str("type");
  auto num = [&](const char* k, double dflt) {
    TEMPER_CHECK(!rs.contains(k) || rs[k].is_number())
        << where << "." << k << " must be a number, got " << rs[k].dump();
    return rs.contains(k) ? rs[k].get<double>() : dflt;
  };
  using T = kernels::RopeScaling::Type;
  if (type == "default") return r;
  if (type == "linear") {
    r.type = T::linear;
    r.factor = num("factor", 1.0);
  } else if (type == "llama3") {
    r.type = T::llama3;
    r.factor = num("factor", 1.0);
    r.low_freq_factor = num("low_freq_factor", 1.0);
    r.high_freq_factor = num("high_freq_factor", 4.0);
    r.original_max_position = static_cast<int64_t>(num("original_max_position_embeddings", 0));
    TEMPER_CHECK(r.original_max_position > 0 && r.high_freq_factor > r.low_freq_factor)
        << where
        << ": llama3 scaling needs original_max_position_embeddings > 0 and high_freq_factor > "
           "low_freq_factor, got "
        << rs.dump();
  } else if (type == "longrope" || type == "su") {
    r.type = T::longrope;
    r.original_max_position = f.opt_int("original_max_position_embeddings", 0);
    if (r.original_max_position == 0)
      r.original_max_position = static_cast<int64_t>(num("original_max_position_embeddings", 0));
    TEMPER_CHECK(r.original_max_position > 0) << where << ": longrope needs original_max_position_embeddings";
    r.factor = static_cast<double>(c.max_position_embeddings) / static_cast<double>(r.original_max_position);
    r.attention_factor = num("attention_factor", 0.0);
    for (const char* k : {"short_factor", "long_factor"}) {
      TEMPER_CHECK(rs.contains(k) && rs[k].is_array() && static_cast<int64_t>(rs[k].size()) == c.head_dim / 2)
          << where << "." << k << " must be a list of head_dim / 2 = " << c.head_dim / 2 << " numbers";
      std::vector<double>& v = std::string(k) == "short_factor" ? r.short_factor : r.long_factor;
      for (const json& x : rs[k]) {
        TEMPER_CHECK(x.is_number() && x.get<double>() > 0)
            << where << "." << k << " holds " << x.dump() << "; expected positive numbers";
        v.push_back(x.get<double>());
      }
    }
  } else {
    TEMPER_FAIL() << where << " has type '" << type << "' (" << rs.dump()
                  << "); supported: linear, llama3, longrope (or null)";
  }
  TEMPER_CHECK(r.factor > 0 && std::isfinite(r.factor)) << where << ": factor must be > 0, got " << r.factor;
  return r;
}

// The MLP's activation: hidden_activation (Gemma) or hidden_act.
Activation read_activation(const Fields& f, Arch arch) {
  const bool gemma = arch == Arch::gemma2 || arch == Arch::gemma3;
  const char* field = gemma && f.has("hidden_activation") ? "hidden_activation" : "hidden_act";
  std::string act = f.opt_str(field);
  if (act.empty()) act = gemma ? "gelu_pytorch_tanh" : "silu";
  if (act == "silu") return Activation::silu;
  if (act == "gelu_pytorch_tanh") return Activation::gelu_tanh;
  TEMPER_FAIL() << f.path << ": field '" << field << "' is '" << act << "', expected 'silu' or 'gelu_pytorch_tanh'";
}

// Gemma-2/3: the family's layer and its defaults where config.json leaves a field out (the config classes').
void read_gemma(const Fields& f, ModelConfig& c) {
  c.query_pre_attn_scalar = f.opt_num("query_pre_attn_scalar", 256);
  c.sliding_window = f.opt_int("sliding_window", 4096);
  if (c.arch == Arch::gemma2) {
    c.attn_softcap = f.num_or_null("attn_logit_softcapping", 50.0);
    c.final_softcap = f.num_or_null("final_logit_softcapping", 30.0);
  } else {
    c.attn_softcap = f.num_or_null("attn_logit_softcapping", 0.0);
    c.final_softcap = f.num_or_null("final_logit_softcapping", 0.0);
    c.sliding_pattern = f.opt_int("sliding_window_pattern", c.sliding_pattern);
    c.rope_local_theta = f.opt_num("rope_local_base_freq", 10000.0);
    TEMPER_CHECK(c.sliding_pattern > 0) << f.path << ": field 'sliding_window_pattern' must be > 0, got "
                                        << c.sliding_pattern;
  }
}

// Fields that select variants the model does not implement are refused, not loaded wrongly.
void refuse_unsupported(const Fields& f, const ModelConfig& c) {
  const std::string& path = f.path;
  TEMPER_CHECK(c.arch == Arch::qwen2 || !f.opt_bool("attention_bias"))
      << path << ": field 'attention_bias' is true (biases on q/k/v/o); expected false for " << arch_name(c.arch);
  TEMPER_CHECK(!f.opt_bool("mlp_bias")) << path << ": field 'mlp_bias' is true; expected false (MLP without biases)";
  if (c.arch == Arch::qwen2 || c.arch == Arch::qwen3)
    TEMPER_CHECK(!f.opt_bool("use_sliding_window"))
        << path
        << ": field 'use_sliding_window' is true; Qwen's per-layer sliding window (max_window_layers) is not "
           "supported (expected false)";
  const double partial = f.opt_num("partial_rotary_factor", 1.0);
  TEMPER_CHECK(partial == 1.0) << path << ": field 'partial_rotary_factor' is " << partial
                               << "; only full-width RoPE is supported (expected 1.0)";
}

}  // namespace

ModelConfig read_hf_config(const std::string& path) {
  json j = read_json_file(path);
  TEMPER_CHECK(j.is_object()) << path << ": must be a JSON object";
  const Fields f{path, j};
  ModelConfig c;
  c.arch = read_arch(f);
  c.vocab_size = f.req_int("vocab_size");
  c.hidden_size = f.req_int("hidden_size");
  c.num_layers = f.req_int("num_hidden_layers");
  c.num_heads = f.req_int("num_attention_heads");
  c.num_kv_heads = f.opt_int("num_key_value_heads", c.num_heads);
  c.intermediate_size = f.req_int("intermediate_size");
  c.head_dim = f.opt_int("head_dim", c.num_heads > 0 ? c.hidden_size / c.num_heads : 0);
  if (j.contains("max_position_embeddings")) c.max_position_embeddings = f.req_int("max_position_embeddings");
  c.rope_theta = f.opt_num("rope_theta", c.arch == Arch::gemma3 ? 1000000.0 : 10000.0);
  c.rms_norm_eps = f.opt_num("rms_norm_eps", 1e-6);
  const bool gemma = c.arch == Arch::gemma2 || c.arch == Arch::gemma3;
  c.tie_word_embeddings = f.opt_bool("tie_word_embeddings", gemma);  // the config classes' defaults
  apply_arch_features(c);
  c.act = read_activation(f, c.arch);  // checks the file's activation is the family's
  if (gemma) read_gemma(f, c);
  if (c.arch == Arch::mistral || c.arch == Arch::phi3) c.sliding_window = f.opt_int("sliding_window", 0);
  c.pad_token_id = f.opt_int("pad_token_id", -1);
  if (c.pad_token_id >= c.vocab_size) c.pad_token_id = -1;  // not a row of the table: no padding_idx
  c.rope_scaling = read_rope_scaling(f, c);
  refuse_unsupported(f, c);
  c.validate(path);
  return c;
}

namespace {

const char* class_name(Arch a) {
  switch (a) {
    case Arch::llama:
      return "LlamaForCausalLM";
    case Arch::qwen2:
      return "Qwen2ForCausalLM";
    case Arch::qwen3:
      return "Qwen3ForCausalLM";
    case Arch::mistral:
      return "MistralForCausalLM";
    case Arch::gemma2:
      return "Gemma2ForCausalLM";
    case Arch::gemma3:
      return "Gemma3ForCausalLM";
    case Arch::phi3:
      return "Phi3ForCausalLM";
  }
  return "?";
}

nlohmann::ordered_json rope_scaling_json(const kernels::RopeScaling& r) {
  using T = kernels::RopeScaling::Type;
  nlohmann::ordered_json j;
  switch (r.type) {
    case T::none:
      return nullptr;
    case T::linear:
      j["rope_type"] = "linear";
      j["factor"] = r.factor;
      break;
    case T::llama3:
      j["rope_type"] = "llama3";
      j["factor"] = r.factor;
      j["low_freq_factor"] = r.low_freq_factor;
      j["high_freq_factor"] = r.high_freq_factor;
      j["original_max_position_embeddings"] = r.original_max_position;
      break;
    case T::longrope:
      j["type"] = "longrope";
      j["short_factor"] = r.short_factor;
      j["long_factor"] = r.long_factor;
      if (r.attention_factor > 0) j["attention_factor"] = r.attention_factor;
      break;
  }
  return j;
}

nlohmann::json or_null(double v) {
  return v > 0 ? nlohmann::json(v) : nlohmann::json(nullptr);
}

}  // namespace

nlohmann::ordered_json hf_config_json(const ModelConfig& c) {
  nlohmann::ordered_json j;
  const bool gemma = c.arch == Arch::gemma2 || c.arch == Arch::gemma3;
  j["architectures"] = {class_name(c.arch)};
  j["model_type"] = c.arch == Arch::gemma3 ? "gemma3_text" : arch_name(c.arch);
  j["vocab_size"] = c.vocab_size;
  j["hidden_size"] = c.hidden_size;
  j["intermediate_size"] = c.intermediate_size;
  j["num_hidden_layers"] = c.num_layers;
  j["num_attention_heads"] = c.num_heads;
  j["num_key_value_heads"] = c.num_kv_heads;
  j["head_dim"] = c.head_dim;
  j["max_position_embeddings"] = c.max_position_embeddings;
  j["rope_theta"] = c.rope_theta;
  j["rms_norm_eps"] = c.rms_norm_eps;
  j["tie_word_embeddings"] = c.tie_word_embeddings;
  const char* act = c.act == Activation::silu ? "silu" : "gelu_pytorch_tanh";
  j["hidden_act"] = act;
  if (gemma) j["hidden_activation"] = act;
  j["attention_bias"] = c.arch == Arch::qwen2;
  j["attention_dropout"] = 0.0;
  if (c.arch == Arch::llama) j["mlp_bias"] = false;
  if (c.arch == Arch::qwen2 || c.arch == Arch::qwen3) {
    j["use_sliding_window"] = false;
    j["sliding_window"] = nullptr;  // transformers 4.51 applies a non-null window even when unused
  } else if (c.arch != Arch::llama) {
    j["sliding_window"] = c.sliding_window > 0 ? nlohmann::json(c.sliding_window) : nlohmann::json(nullptr);
  }
  if (gemma) {
    j["query_pre_attn_scalar"] = c.query_pre_attn_scalar;
    j["attn_logit_softcapping"] = or_null(c.attn_softcap);
    j["final_logit_softcapping"] = or_null(c.final_softcap);
  }
  if (c.arch == Arch::gemma3) {
    j["sliding_window_pattern"] = c.sliding_pattern;
    j["rope_local_base_freq"] = c.rope_local_theta;
  }
  if (c.rope_scaling.type == kernels::RopeScaling::Type::longrope)
    j["original_max_position_embeddings"] = c.rope_scaling.original_max_position;
  j["rope_scaling"] = rope_scaling_json(c.rope_scaling);
  // null where there is none: Phi-3's config class would otherwise default to 32000.
  j["pad_token_id"] = c.pad_token_id >= 0 ? nlohmann::json(c.pad_token_id) : nlohmann::json(nullptr);
  return j;
}

}  // namespace temper::io
