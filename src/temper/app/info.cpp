#include "temper/app/info.h"

#include <cstdio>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>

#include "temper/app/cpu_report.h"
#include "temper/app/memory_plan.h"
#include "temper/app/model_source.h"
#include "temper/core/error.h"
#include "temper/core/thread_pool.h"
#include "temper/io/gguf_file.h"
#include "temper/io/gguf_model.h"
#include "temper/io/hf_config.h"
#include "temper/io/hf_model_dir.h"
#include "temper/io/safetensors_set.h"
#include "temper/kernels/matmul.h"
#include "temper/model/device_model.h"
#include "temper/version.h"

namespace temper::app {
namespace fs = std::filesystem;

namespace {

std::string mib(double bytes) {
  return format_bytes(bytes);
}

// What the model file is (said when `say`) and its stored tensors' types; the config is read_model_config's.
ModelConfig describe_model(const std::string& path, bool say, std::map<std::string, int>* dtypes) {
  const ModelConfig c = read_model_config(path);
  if (fs::is_regular_file(path) && is_gguf_path(path)) {
    io::GgufFile f = io::GgufFile::open(path);
    for (const auto& t : f.tensors()) (*dtypes)[std::string(io::ggml_type_name(t.type))]++;
    if (say) {
      std::printf("model: %s (GGUF v%u, %s)\n", path.c_str(), f.version(), mib(fs::file_size(path)).c_str());
      if (f.find("general.name")) std::printf("name: %s\n", f.get_str("general.name").c_str());
    }
    return c;
  }
  if (say) std::printf("model: %s (Hugging Face)\n", path.c_str());
  if (fs::is_directory(path) && io::read_hf_model_dir(path).has_weights) {
    io::SafetensorsSet st = io::SafetensorsSet::open(path);
    for (const auto& n : st.names()) (*dtypes)[std::string(dtype_name(st.get(n).dtype()))]++;
  }
  return c;
}

MemorySettings plan_settings(const InfoOptions& o, const ModelConfig& c) {
  MemorySettings s;
  s.device = o.device;
  TEMPER_CHECK(kernels::precision_from_name(o.precision, &s.precision))
      << "--precision must be f32 or bf16, got '" << o.precision << "'";
  s.recompute = o.recompute;
  s.micro_batch = o.batch;
  s.seq = o.seq > 0 ? o.seq : std::min<int64_t>(1024, c.max_position_embeddings);
  s.ranks = o.ranks;
  s.local_ranks = static_cast<int>(std::max<int64_t>(1, o.ranks));  // ranks of a CPU run share one machine
  s.shard_optimizer = o.zero || o.zero2;
  s.shard_gradients = o.zero2;
  // As run.shard_gradients is refused (app/run_config.cpp): adapters' gradients are not sharded, nor a device's.
  TEMPER_CHECK(!o.zero2 || (o.lora == 0 && s.device == "cpu"))
      << "--zero2 (run.shard_gradients) shards a full fine-tune's gradients on the CPU: not with "
      << (o.lora > 0 ? std::string("--lora") : "--device " + s.device);
  s.prompts = o.prompts, s.group = o.group, s.max_new = o.max_new, s.max_seqs = o.max_seqs;
  s.kv_memory_mb = o.kv_mb;
  s.reference = o.kl;
  s.evaluation = o.eval;
  if (o.kv_mb > 0) s.eval_kv_memory_mb = o.kv_mb;
  s.lora_rank = o.lora;
  LoraBase base = o.qlora ? LoraBase::int4 : LoraBase::bf16;
  TEMPER_CHECK(o.lora_base.empty() || lora_base_from_name(o.lora_base, &base))
      << "--lora-base must be f32, bf16, int4 or nf4, got '" << o.lora_base << "'";
  TEMPER_CHECK(!o.qlora || base == LoraBase::int4) << "--qlora is --lora-base int4, not " << o.lora_base;
  TEMPER_CHECK(o.lora > 0 || o.lora_base.empty()) << "--lora-base " << o.lora_base << " needs --lora R";
  s.qlora = base == LoraBase::int4 || base == LoraBase::nf4;
  if (s.qlora) s.qlora_format = base;
  s.lora_full_base = base == LoraBase::f32;
  s.lora_held = o.lora > 0 && s.device == "cpu";  // [lora] base = "bf16" / "int4" / "nf4" as the CPU holds it
  if (!o.teacher.empty()) s.teacher = read_model_config(o.teacher);
  return s;
}

// The base a plan's adapters sit on, as [lora] base names it.
std::string planned_base(const MemorySettings& s) {
  return std::string(lora_base_name(s.qlora ? s.qlora_format : s.lora_full_base ? LoraBase::f32 : LoraBase::bf16));
}

// The plan, the largest micro-batch that fits and, when the asked one does not, what would.
void print_memory(const ModelConfig& c, const InfoOptions& o) {
  const MemorySettings s = plan_settings(o, c);
  const MemoryPlan p = plan_memory(c, s);
  const bool cpu_side = s.device == "cpu" || s.device == "mirror";
  double budget = o.device_memory_gib > 0 ? o.device_memory_gib * 1024 * 1024 * 1024 : device_memory_bytes(s.device);
  if (cpu_side && o.device_memory_gib <= 0) budget /= static_cast<double>(s.local_ranks);
  const int64_t largest = largest_micro_batch(c, s, budget);
  if (o.json) {
    nlohmann::json items = nlohmann::json::array();
    for (const MemoryItem& i : p.items)
      items.push_back({{"name", i.name}, {"bytes", i.bytes}, {"where", p.on_device && !i.host ? "device" : "host"}});
    nlohmann::json j = {{"params", p.params},
                        {"trainable", p.trainable},
                        {"tokens", p.tokens},
                        {"items", items},
                        {"total_bytes", p.device_bytes()},
                        {"host_bytes", p.host_bytes()},
                        {"budget_bytes", budget},
                        {"fits", budget > 0 && p.device_bytes() <= budget},
                        {"largest_micro_batch", largest}};
    std::printf("%s\n", j.dump().c_str());
    return;
  }
  std::printf("parameters: %lld (%.1f M)", static_cast<long long>(p.params), p.params / 1e6);
  if (p.trainable != p.params)
    std::printf("; trainable %lld (%.2f%%)", static_cast<long long>(p.trainable),
                100.0 * static_cast<double>(p.trainable) / static_cast<double>(p.params));
  std::printf("\n%s", format_memory_plan(p, s, budget).c_str());
  if (s.lora_rank > 0)
    std::printf("note: this plans LoRA on a %s base (temper train: [lora] base = \"%s\")%s\n",
                s.qlora ? "4-bit" : planned_base(s).c_str(), planned_base(s).c_str(),
                s.lora_held ? "" : "; on a device the held base is planned, not built (refused at validation)");
  if (budget <= 0) {
    std::printf("device memory: unknown here (no %s visible): give --device-memory GiB to plan for one\n",
                s.device.c_str());
    return;
  }
  std::printf("largest micro-batch of %lld-token sequences that fits %s: %lld\n", static_cast<long long>(s.seq),
              mib(budget).c_str(), static_cast<long long>(largest));
  for (const std::string& f : memory_fit_suggestions(c, s, budget)) std::printf("  would fit with %s\n", f.c_str());
}

}  // namespace

int info(const InfoOptions& o) {
  if (!o.json) {
    std::printf("temper %s\n", TEMPER_VERSION);
    std::printf("%s", cpu_report_text().c_str());
    std::printf("%s\n", cuda_summary().c_str());
  }
  if (o.model.empty()) {
    TEMPER_CHECK(!o.json) << "temper info --json: give a MODEL to plan";
    return 0;
  }
  std::map<std::string, int> dtypes;
  const ModelConfig c = describe_model(o.model, !o.json, &dtypes);
  if (o.json) {
    print_memory(c, o);
    return 0;
  }
  std::printf("architecture: %s\n", c.summary().c_str());
  std::string feats;
  for (const std::string& f : c.features()) feats += (feats.empty() ? "" : ", ") + f;
  std::printf("features: %s\n", feats.empty() ? "none beyond the Llama block" : feats.c_str());
  // Every feature runs in training and rollouts on each device; the one gap is the CUDA-graph decode of `temper
  // bench cuda` with longrope (its long/short choice depends on positions that stay on the device).
  const bool longrope = c.rope_scaling.type == kernels::RopeScaling::Type::longrope;
  std::printf("devices: cpu and mirror: all of it; cuda: all of it%s\n",
              longrope ? " (not `temper bench cuda`'s graph decode: longrope)" : "");
  std::printf("context: %lld tokens, rope_theta %g, rms_norm_eps %g\n",
              static_cast<long long>(c.max_position_embeddings), c.rope_theta, c.rms_norm_eps);
  if (!dtypes.empty()) {
    std::printf("stored tensors:");
    for (auto& [k, v] : dtypes) std::printf(" %s x%d", k.c_str(), v);
    std::printf("\n");
  }
  print_memory(c, o);
  return 0;
}

}  // namespace temper::app
