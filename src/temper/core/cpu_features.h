// Instruction sets the CPU kernels are compiled for, the CPUID probe, and the run-time choice.
// TEMPER_ISA=scalar|avx2|avx512 overrides the choice (it must be supported by the CPU).
// Tests switch ISA with cpu_set_isa() to run every variant the machine has.
#pragma once

#include <string_view>
#include <vector>

namespace temper {

enum class Isa { scalar = 0, avx2 = 1, avx512 = 2 };

struct CpuFeatures {
  bool avx2 = false, fma = false, f16c = false;
  bool avx512f = false, avx512bw = false, avx512vl = false, avx512dq = false;
  bool avx512_bf16 = false, avx512_vnni = false, avx_vnni = false;
  // AMX tiles with bf16 products, and the OS saves the tile state (XCR0 bits 17, 18). Linux also wants the
  // process to ask for the tile data once (kernels/cpu/gemm_amx.h does, before the first use).
  bool amx_tile = false, amx_bf16 = false;
};

const CpuFeatures& cpu_features();
bool cpu_isa_supported(Isa isa);
std::vector<Isa> cpu_supported_isas();  // ascending
Isa cpu_isa();                          // active: env override or the best supported
void cpu_set_isa(Isa isa);              // throws if unsupported
std::string_view isa_name(Isa isa);
bool isa_from_name(std::string_view name, Isa* out);

}  // namespace temper
