#include "temper/app/info.h"

#include <cstdio>
#include <filesystem>
#include <map>

#include "temper/app/model_source.h"
#include "temper/core/cpu_features.h"
#include "temper/core/error.h"
#include "temper/core/thread_pool.h"
#include "temper/io/gguf_file.h"
#include "temper/io/gguf_model.h"
#include "temper/io/hf_config.h"
#include "temper/io/hf_model_dir.h"
#include "temper/io/safetensors_set.h"
#include "temper/kernels/matmul.h"
#include "temper/model/transformer.h"
#include "temper/version.h"

namespace temper::app {
namespace fs = std::filesystem;

namespace {

std::string mib(double bytes) {
  char b[64];
  if (bytes >= 1024.0 * 1024 * 1024) std::snprintf(b, sizeof b, "%.2f GiB", bytes / (1024.0 * 1024 * 1024));
  else std::snprintf(b, sizeof b, "%.1f MiB", bytes / (1024.0 * 1024));
  return b;
}

void print_memory(const ModelConfig& c) {
  // A Transformer costs nothing until written (its buffers are lazily zeroed pages), so planning one
  // gives the exact arena sizes the training step would reserve.
  ModelConfig cc = c;
  if (cc.max_position_embeddings < 1024) cc.max_position_embeddings = 1024;
  Transformer m(cc);
  int64_t n = m.num_params();
  std::printf("parameters: %lld (%.1f M)\n", static_cast<long long>(n), n / 1e6);
  double state = 4.0 * 4.0 * static_cast<double>(m.flat_size());
  std::printf("training memory: %s for f32 params + grads + AdamW m, v", mib(state).c_str());
  m.plan(8 * 1024, 1024);
  double act = static_cast<double>(m.activation_bytes());
  m.set_recompute(true);
  double act_rc = static_cast<double>(m.activation_bytes());
  std::printf("; activations for 8 x 1024 tokens: %s (%s with --recompute)\n", mib(act).c_str(), mib(act_rc).c_str());
}

}  // namespace

int info(const InfoOptions& o) {
  std::printf("temper %s\n", TEMPER_VERSION);
  std::string isas;
  for (Isa i : cpu_supported_isas()) isas += std::string(isa_name(i)) + " ";
  std::printf("cpu: isas %s(active %s), avx512_bf16 %s, threads %d, gemm f32 %s, bf16 onednn\n", isas.c_str(),
              std::string(isa_name(cpu_isa())).c_str(), cpu_features().avx512_bf16 ? "yes" : "no", num_threads(),
              std::string(kernels::gemm_backend_name(kernels::gemm_backend())).c_str());
  std::printf("%s\n", cuda_summary().c_str());
  if (o.model.empty()) return 0;
  TEMPER_CHECK(fs::exists(o.model)) << o.model << ": no such file or directory";
  ModelConfig c;
  std::map<std::string, int> dtypes;
  if (fs::is_regular_file(o.model) && is_gguf_path(o.model)) {
    io::GgufFile f = io::GgufFile::open(o.model);
    c = io::gguf_model_config(f);
    for (const auto& t : f.tensors()) dtypes[std::string(io::ggml_type_name(t.type))]++;
    std::printf("model: %s (GGUF v%u, %s)\n", o.model.c_str(), f.version(), mib(fs::file_size(o.model)).c_str());
    if (f.find("general.name")) std::printf("name: %s\n", f.get_str("general.name").c_str());
  } else if (fs::is_directory(o.model) || o.model.size() < 5 || o.model.substr(o.model.size() - 5) == ".json") {
    std::string cfg = fs::is_directory(o.model) ? o.model + "/config.json" : o.model;
    c = io::read_hf_config(cfg);
    std::printf("model: %s (Hugging Face)\n", o.model.c_str());
    if (fs::is_directory(o.model) && io::read_hf_model_dir(o.model).has_weights) {
      io::SafetensorsSet st = io::SafetensorsSet::open(o.model);
      for (const auto& n : st.names()) dtypes[std::string(dtype_name(st.get(n).dtype()))]++;
    }
  } else {
    TEMPER_FAIL() << o.model << ": not a model temper can describe (a Hugging Face directory, config.json or .gguf)";
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
  std::printf("context: %lld tokens, rope_theta %g, rms_norm_eps %g\n", static_cast<long long>(c.max_position_embeddings),
              c.rope_theta, c.rms_norm_eps);
  if (!dtypes.empty()) {
    std::printf("stored tensors:");
    for (auto& [k, v] : dtypes) std::printf(" %s x%d", k.c_str(), v);
    std::printf("\n");
  }
  print_memory(c);
  return 0;
}

}  // namespace temper::app
