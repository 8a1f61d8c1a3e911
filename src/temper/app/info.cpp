#include "temper/app/info.h"

#include <cstdio>
#include <filesystem>

#include "temper/core/cpu_features.h"
#include "temper/core/thread_pool.h"
#include "temper/io/hf_config.h"
#include "temper/kernels/matmul.h"
#include "temper/model/param_layout.h"
#include "temper/version.h"

namespace temper::app {

int info(const InfoOptions& o) {
  std::printf("temper %s\n", TEMPER_VERSION);
  std::string isas;
  for (Isa i : cpu_supported_isas()) isas += std::string(isa_name(i)) + " ";
  std::printf("cpu: isas %s(active %s), avx512_bf16 %s, threads %d, gemm f32 %s, bf16 onednn\n", isas.c_str(),
              std::string(isa_name(cpu_isa())).c_str(), cpu_features().avx512_bf16 ? "yes" : "no", num_threads(),
              std::string(kernels::gemm_backend_name(kernels::gemm_backend())).c_str());
  if (o.model.empty()) return 0;
  std::string cfg_path = std::filesystem::is_directory(o.model) ? o.model + "/config.json" : o.model;
  ModelConfig c = io::read_hf_config(cfg_path);
  ParamLayout layout(c);
  int64_t n = 0;
  for (auto& e : layout.entries()) n += e.numel();
  std::printf("model: %s\n", c.summary().c_str());
  std::printf("parameters: %lld (%.1f M); training state f32 params+grads+AdamW m,v: %.1f MiB\n",
              static_cast<long long>(n), n / 1e6, 4.0 * 4 * static_cast<double>(layout.total()) / 1048576.0);
  return 0;
}

}  // namespace temper::app
