// What this machine is and which product paths the engine chose on it, in one place: `temper info` prints it
// and every bench JSON line records it (cpu, isa, amx, bf16_gemm, gemm, attention), so a figure in
// docs/PERFORMANCE.md always names the CPU and the kernels behind it.
// Leaves out: measured rates (`temper bench roofline`).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace temper::app {

// /proc/cpuinfo's first "model name" (Linux x86), else "unknown".
std::string cpu_model_name();

// The lines `temper info` prints: the CPU model, its ISAs (the active one), AMX, avx512_bf16, the threads,
// the bf16 and f32 product paths, and the training attention's kernels.
std::string cpu_report_text();

// Adds "cpu", "isa", "amx" (the CPU has AMX-BF16 tiles the OS enables), "bf16_gemm" (kernels::bf16_path),
// "gemm" (the f32 backend) and "attention" (kernels::attention_kernel_name) to a bench's JSON object.
void add_cpu_fields(nlohmann::json& j);

}  // namespace temper::app
