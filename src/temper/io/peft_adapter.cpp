#include "temper/io/peft_adapter.h"

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>

#include "temper/core/error.h"
#include "temper/io/atomic_file.h"
#include "temper/io/json_file.h"
#include "temper/io/safetensors.h"
#include "temper/io/safetensors_writer.h"
#include "temper/model/frozen_base.h"

namespace temper::io {

namespace fs = std::filesystem;

namespace {

constexpr const char* kConfigFile = "adapter_config.json";
constexpr const char* kWeightsFile = "adapter_model.safetensors";
// temper's own field: the base the adapters were trained on when it was held as bf16, int4 or nf4 (absent: f32). PEFT
// ignores it (with a warning); merging dequantises the base as training did.
constexpr const char* kBaseField = "temper_lora_base";

std::string module_leaf(LoraTarget t) {  // "q_proj"
  std::string_view m = lora_target_module(t);
  return std::string(m.substr(m.find('.') + 1));
}

bool fused_target(LoraTarget t) {
  return t != LoraTarget::o && t != LoraTarget::down;
}

// Phi-3 stores q/k/v and gate/up as one module each (qkv_proj, gate_up_proj): PEFT adapts those as one product
// with one A; temper's adapters are per q, k, v, gate, up.
void check_names_exist(const ModelConfig& model, const LoraConfig& cfg, const std::string& where) {
  if (!model.fused_proj) return;
  for (LoraTarget t : cfg.targets)
    TEMPER_CHECK(!fused_target(t)) << where << ": this model (" << arch_name(model.arch)
                                   << ") stores q/k/v and gate/up fused (qkv_proj, gate_up_proj), which PEFT adapts "
                                      "as one module each; temper's adapter on '"
                                   << lora_target_name(t)
                                   << "' has no PEFT name (only o and down adapters are exchanged for this model)";
}

}  // namespace

std::string peft_tensor_name(int64_t layer, LoraTarget t, bool a) {
  return "base_model.model.model.layers." + std::to_string(layer) + "." + std::string(lora_target_module(t)) +
         (a ? ".lora_A.weight" : ".lora_B.weight");
}

void write_peft_adapter(const LoraAdapters& ad, const std::string& dir, const PeftWriteOptions& o) {
  TEMPER_CHECK(o.dtype == DType::f32 || o.dtype == DType::bf16)
      << dir << ": PEFT adapter dtype must be f32 or bf16, got " << dtype_name(o.dtype);
  const LoraConfig& c = ad.config();
  check_names_exist(ad.model_config(), c, dir);
  nlohmann::ordered_json j = nlohmann::ordered_json::object();  // PEFT's fields, sorted as it writes them
  j["alpha_pattern"] = nlohmann::ordered_json::object();
  j["auto_mapping"] = nullptr;
  j["base_model_name_or_path"] = o.base_model_name_or_path;
  j["bias"] = "none";
  j["fan_in_fan_out"] = false;
  j["inference_mode"] = true;
  j["init_lora_weights"] = true;
  j["layers_pattern"] = nullptr;
  j["layers_to_transform"] = nullptr;
  if (c.alpha == std::floor(c.alpha) && std::fabs(c.alpha) < 1e9)
    j["lora_alpha"] = static_cast<int64_t>(c.alpha);
  else
    j["lora_alpha"] = c.alpha;
  j["lora_dropout"] = c.dropout;
  j["modules_to_save"] = nullptr;
  j["peft_type"] = "LORA";
  j["r"] = c.rank;
  j["rank_pattern"] = nlohmann::ordered_json::object();
  j["revision"] = nullptr;
  nlohmann::ordered_json targets = nlohmann::ordered_json::array();
  for (LoraTarget t : c.targets) targets.push_back(module_leaf(t));
  j["target_modules"] = targets;
  j["task_type"] = "CAUSAL_LM";
  if (c.base != LoraBase::f32) j[kBaseField] = std::string(lora_base_name(c.base));
  j["use_dora"] = false;
  j["use_rslora"] = c.use_rslora;
  std::vector<NamedTensor> tensors;
  for (int64_t l = 0; l < ad.model_config().num_layers; ++l)
    for (LoraTarget t : c.targets) {
      Tensor a = ad.a(l, t), b = ad.b(l, t);
      tensors.push_back({peft_tensor_name(l, t, true), o.dtype == DType::f32 ? a.clone() : a.to(o.dtype)});
      tensors.push_back({peft_tensor_name(l, t, false), o.dtype == DType::f32 ? b.clone() : b.to(o.dtype)});
    }
  fs::create_directories(dir);
  write_safetensors((fs::path(dir) / kWeightsFile).string(), tensors, {{"format", "pt"}});
  write_text_atomic((fs::path(dir) / kConfigFile).string(), j.dump(2) + "\n");
}

LoraConfig read_peft_adapter_config(const std::string& dir, const PeftReadOptions& o) {
  const std::string path = (fs::path(dir) / kConfigFile).string();
  TEMPER_CHECK(fs::exists(path)) << dir << ": no " << kConfigFile << " (not a PEFT adapter directory)";
  const nlohmann::json j = read_json_file(path);
  TEMPER_CHECK(j.is_object()) << path << ": expected a JSON object";
  auto field = [&](const char* name) -> const nlohmann::json* {
    auto it = j.find(name);
    return it == j.end() || it->is_null() ? nullptr : &*it;
  };
  const nlohmann::json* type = field("peft_type");
  TEMPER_CHECK(type && type->is_string()) << path << ": field 'peft_type' missing (expected \"LORA\")";
  TEMPER_CHECK(type->get<std::string>() == "LORA")
      << path << ": field 'peft_type' is " << type->dump() << "; temper reads LoRA adapters (\"LORA\") only";
  LoraConfig c;
  const nlohmann::json* r = field("r");
  TEMPER_CHECK(r && r->is_number_integer()) << path << ": field 'r' must be an integer rank";
  c.rank = r->get<int64_t>();
  const nlohmann::json* alpha = field("lora_alpha");
  TEMPER_CHECK(alpha && alpha->is_number()) << path << ": field 'lora_alpha' must be a number";
  c.alpha = alpha->get<double>();
  if (const nlohmann::json* d = field("lora_dropout")) {
    TEMPER_CHECK(d->is_number()) << path << ": field 'lora_dropout' must be a number, got " << d->dump();
    const double dropout = d->get<double>();
    TEMPER_CHECK(dropout == 0 || o.ignore_dropout)
        << path << ": field 'lora_dropout' is " << dropout
        << "; temper trains adapters without dropout (0 only; loading for inference or merging ignores it)";
  }
  if (const nlohmann::json* rs = field("use_rslora")) {
    TEMPER_CHECK(rs->is_boolean()) << path << ": field 'use_rslora' must be true or false";
    c.use_rslora = rs->get<bool>();
  }
  if (const nlohmann::json* b = field(kBaseField)) {
    TEMPER_CHECK(b->is_string() && lora_base_from_name(b->get<std::string>(), &c.base))
        << path << ": field '" << kBaseField << "' is " << b->dump()
        << "; expected \"f32\", \"bf16\", \"int4\" or \"nf4\"";
  }
  // What temper's adapters cannot hold.
  auto refuse_if = [&](const char* name, bool bad, const std::string& why) {
    TEMPER_CHECK(!bad) << path << ": field '" << name << "' is " << j.at(name).dump() << "; " << why;
  };
  auto non_empty = [&](const char* name) {
    const nlohmann::json* v = field(name);
    return v && !(v->is_object() && v->empty()) && !(v->is_array() && v->empty());
  };
  auto is_true = [&](const char* name) {
    const nlohmann::json* v = field(name);
    return v && v->is_boolean() && v->get<bool>();
  };
  if (const nlohmann::json* b = field("bias"))
    refuse_if("bias", !(b->is_string() && b->get<std::string>() == "none"),
              "temper's adapters have no bias (\"none\")");
  refuse_if("use_dora", is_true("use_dora"), "DoRA adapters are not supported");
  refuse_if("lora_bias", is_true("lora_bias"), "adapters with a bias on lora_B are not supported");
  refuse_if("fan_in_fan_out", is_true("fan_in_fan_out"), "only nn.Linear modules (fan_in_fan_out false) are adapted");
  refuse_if("rank_pattern", non_empty("rank_pattern"), "every module must have rank r (no per-module ranks)");
  refuse_if("alpha_pattern", non_empty("alpha_pattern"), "every module must have lora_alpha (no per-module alphas)");
  refuse_if("modules_to_save", non_empty("modules_to_save"), "fully trained extra modules are not supported");
  refuse_if("layers_to_transform", non_empty("layers_to_transform"), "every layer must be adapted");
  refuse_if("trainable_token_indices", non_empty("trainable_token_indices"), "trainable tokens are not supported");
  const nlohmann::json* tm = field("target_modules");
  TEMPER_CHECK(tm) << path << ": field 'target_modules' missing (expected a list such as [\"q_proj\", \"v_proj\"])";
  c.targets.clear();
  if (tm->is_string()) {
    TEMPER_CHECK(tm->get<std::string>() == "all-linear")
        << path << ": field 'target_modules' is the pattern " << tm->dump()
        << "; temper reads a list of module names (q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj) "
           "or \"all-linear\"";
    c.targets = {LoraTarget::q,    LoraTarget::k,  LoraTarget::v,   LoraTarget::o,
                 LoraTarget::gate, LoraTarget::up, LoraTarget::down};
  } else {
    TEMPER_CHECK(tm->is_array()) << path << ": field 'target_modules' must be a list of module names";
    for (const nlohmann::json& m : *tm) {
      TEMPER_CHECK(m.is_string()) << path << ": field 'target_modules' has a non-string entry " << m.dump();
      const std::string name = m.get<std::string>();
      LoraTarget t;
      TEMPER_CHECK(name.find("_proj") != std::string::npos && lora_target_from_name(name, &t))
          << path << ": field 'target_modules' names '" << name
          << "'; temper adapts q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj and down_proj";
      c.targets.push_back(t);
    }
  }
  TEMPER_CHECK(std::set<LoraTarget>(c.targets.begin(), c.targets.end()).size() == c.targets.size())
      << path << ": field 'target_modules' lists a module twice";
  std::vector<LoraTarget> sorted;  // the same order whatever the file's (PEFT writes a set)
  for (int i = 0; i < kLoraTargetCount; ++i)
    for (LoraTarget t : c.targets)
      if (static_cast<int>(t) == i) sorted.push_back(t);
  c.targets = sorted;
  c.validate(path);
  return c;
}

void load_peft_adapter_weights(LoraAdapters& ad, const std::string& dir) {
  const LoraConfig have = read_peft_adapter_config(dir, {.ignore_dropout = true});
  const LoraConfig& want = ad.config();
  const std::string cfg_path = (fs::path(dir) / kConfigFile).string();
  TEMPER_CHECK(have.rank == want.rank && have.alpha == want.alpha && have.use_rslora == want.use_rslora &&
               have.targets.size() == want.targets.size())
      << cfg_path << ": the adapter has r " << have.rank << ", lora_alpha " << have.alpha << ", use_rslora "
      << have.use_rslora << " and " << have.targets.size() << " target modules; the run's adapters have rank "
      << want.rank << ", alpha " << want.alpha << ", rslora " << want.use_rslora << " and " << want.targets.size()
      << " targets";
  for (LoraTarget t : want.targets)
    TEMPER_CHECK(have.has(t)) << cfg_path << ": field 'target_modules' lacks '" << module_leaf(t)
                              << "', which the run's adapters target";
  TEMPER_CHECK(want.base == LoraBase::f32 || have.base == want.base)
      << cfg_path << ": the adapter was trained on a " << lora_base_name(have.base) << " base (field '" << kBaseField
      << "'); the run's base is " << lora_base_name(want.base) << " ([lora] base)";
  check_names_exist(ad.model_config(), want, dir);
  const std::string path = (fs::path(dir) / kWeightsFile).string();
  if (!fs::exists(path)) {
    TEMPER_CHECK(!fs::exists(fs::path(dir) / "adapter_model.bin"))
        << dir
        << ": the adapter is in adapter_model.bin (a pickle), which temper does not read; save it with "
           "save_pretrained(..., safe_serialization=True) to get adapter_model.safetensors";
    TEMPER_FAIL() << dir << ": no " << kWeightsFile;
  }
  SafetensorsFile f = SafetensorsFile::open(path);
  std::set<std::string> expected;
  const int64_t r = want.rank;
  for (int64_t l = 0; l < ad.model_config().num_layers; ++l)
    for (LoraTarget t : want.targets) {
      const LoraProduct& p = *ad.find(l, t);
      for (bool is_a : {true, false}) {
        const std::string name = peft_tensor_name(l, t, is_a);
        expected.insert(name);
        TEMPER_CHECK(f.has(name)) << path << ": tensor '" << name << "' missing (the config targets " << module_leaf(t)
                                  << " in every layer)";
        Tensor v = f.get(name);
        const Shape want_shape = is_a ? Shape{r, p.in} : Shape{p.out, r};
        TEMPER_CHECK(v.shape() == want_shape) << path << ": tensor '" << name << "' has shape " << v.shape().str()
                                              << ", expected " << want_shape.str() << " for this model at rank " << r;
        copy_to_f32(v, ad.params() + (is_a ? p.a : p.b), want_shape.numel(), path + ": " + name);
      }
    }
  for (const std::string& name : f.names())
    TEMPER_CHECK(expected.count(name)) << path << ": unexpected tensor '" << name
                                       << "' (temper reads lora_A / lora_B of the configured modules of layers 0.."
                                       << ad.model_config().num_layers - 1 << ")";
}

std::unique_ptr<LoraAdapters> read_peft_adapter(const std::string& dir, const ModelConfig& model,
                                                const PeftReadOptions& o) {
  LoraConfig c = read_peft_adapter_config(dir, o);
  c.dropout = 0;
  c.base = LoraBase::f32;  // the caller's choice (LoraAdapters::set_base)
  check_names_exist(model, c, dir);
  auto ad = std::make_unique<LoraAdapters>(model, c);
  load_peft_adapter_weights(*ad, dir);
  return ad;
}

void merge_peft_adapter(Transformer& model, const std::string& dir) {
  const LoraBase base = read_peft_adapter_config(dir, {.ignore_dropout = true}).base;
  std::unique_ptr<LoraAdapters> ad = read_peft_adapter(dir, model.config(), {.ignore_dropout = true});
  if (base != LoraBase::f32) {  // the weights the adapters were trained on: the base quantised as training did
    FrozenBase(model.config(), model.layout(), model.params(), base).dequantize_into(model.params());
    model.params_updated();
  }
  ad->merge_into(model);
}

}  // namespace temper::io
