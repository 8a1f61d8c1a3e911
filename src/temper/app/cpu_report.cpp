#include "temper/app/cpu_report.h"

#include <fstream>

#include "temper/core/cpu_features.h"
#include "temper/core/thread_pool.h"
#include "temper/kernels/attention.h"
#include "temper/kernels/matmul.h"

namespace temper::app {

std::string cpu_model_name() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("model name", 0) != 0) continue;
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    const size_t b = line.find_first_not_of(" \t", colon + 1);
    if (b == std::string::npos) continue;
    const size_t e = line.find_last_not_of(" \t\r");
    return line.substr(b, e - b + 1);
  }
  return "unknown";
}

namespace {
std::string str(std::string_view s) {
  return std::string(s);
}
}  // namespace

std::string cpu_report_text() {
  std::string isas;
  for (Isa i : cpu_supported_isas()) isas += str(isa_name(i)) + " ";
  const CpuFeatures& f = cpu_features();
  std::string s = "cpu: " + cpu_model_name() + "\n";
  s += "cpu isas: " + isas + "(active " + str(isa_name(cpu_isa())) + "), avx512_bf16 " +
       (f.avx512_bf16 ? "yes" : "no") + ", amx " + (f.amx_bf16 ? "yes" : "no") + ", threads " +
       std::to_string(num_threads()) + "\n";
  s += "products: bf16 " + str(kernels::bf16_path_name(kernels::bf16_path())) + ", f32 " +
       str(kernels::gemm_backend_name(kernels::gemm_backend())) + "\n";
  s += "attention: " + kernels::attention_kernel_name() + "\n";
  return s;
}

void add_cpu_fields(nlohmann::json& j) {
  j["cpu"] = cpu_model_name();
  j["isa"] = str(isa_name(cpu_isa()));
  j["amx"] = cpu_features().amx_bf16;
  j["bf16_gemm"] = str(kernels::bf16_path_name(kernels::bf16_path()));
  j["gemm"] = str(kernels::gemm_backend_name(kernels::gemm_backend()));
  j["attention"] = kernels::attention_kernel_name();
}

}  // namespace temper::app
