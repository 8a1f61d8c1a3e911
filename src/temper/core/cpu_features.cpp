#include "temper/core/cpu_features.h"

#include <atomic>
#include <cstdlib>

#include "temper/core/error.h"

#if defined(__x86_64__)
#include <cpuid.h>
#endif

namespace temper {
namespace {

CpuFeatures probe() {
  CpuFeatures f;
#if defined(__x86_64__)
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return f;
  bool osxsave = c & (1u << 27);
  f.fma = c & (1u << 12);
  f.f16c = c & (1u << 29);
  unsigned long long xcr0 = 0;
  if (osxsave) {
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    xcr0 = (static_cast<unsigned long long>(hi) << 32) | lo;
  }
  bool ymm_os = (xcr0 & 0x6) == 0x6, zmm_os = (xcr0 & 0xe6) == 0xe6;
  if (__get_cpuid_count(7, 0, &a, &b, &c, &d)) {
    f.avx2 = ymm_os && (b & (1u << 5));
    f.avx512f = zmm_os && (b & (1u << 16));
    f.avx512dq = zmm_os && (b & (1u << 17));
    f.avx512bw = zmm_os && (b & (1u << 30));
    f.avx512vl = zmm_os && (b & (1u << 31));
    f.avx512_vnni = zmm_os && (c & (1u << 11));
    const bool tile_os = (xcr0 & 0x60000) == 0x60000;
    f.amx_tile = tile_os && (d & (1u << 24));
    f.amx_bf16 = f.amx_tile && (d & (1u << 22));
  }
  if (__get_cpuid_count(7, 1, &a, &b, &c, &d)) {
    f.avx512_bf16 = zmm_os && (a & (1u << 5));
    f.avx_vnni = ymm_os && (a & (1u << 4));
  }
#endif
  return f;
}

Isa best_isa() {
  if (cpu_isa_supported(Isa::avx512)) return Isa::avx512;
  if (cpu_isa_supported(Isa::avx2)) return Isa::avx2;
  return Isa::scalar;
}

Isa initial_isa() {
  if (const char* e = std::getenv("TEMPER_ISA")) {
    Isa isa;
    TEMPER_CHECK(isa_from_name(e, &isa)) << "TEMPER_ISA='" << e << "' is not one of scalar, avx2, avx512";
    TEMPER_CHECK(cpu_isa_supported(isa)) << "TEMPER_ISA=" << e << " but this CPU does not support it";
    return isa;
  }
  return best_isa();
}

std::atomic<int>& active() {
  static std::atomic<int> a{static_cast<int>(initial_isa())};
  return a;
}

}  // namespace

const CpuFeatures& cpu_features() {
  static const CpuFeatures f = probe();
  return f;
}

bool cpu_isa_supported(Isa isa) {
  const auto& f = cpu_features();
  switch (isa) {
    case Isa::scalar: return true;
    case Isa::avx2: return f.avx2 && f.fma;
    case Isa::avx512: return f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq && f.fma;
  }
  return false;
}

std::vector<Isa> cpu_supported_isas() {
  std::vector<Isa> v;
  for (Isa i : {Isa::scalar, Isa::avx2, Isa::avx512})
    if (cpu_isa_supported(i)) v.push_back(i);
  return v;
}

Isa cpu_isa() { return static_cast<Isa>(active().load(std::memory_order_relaxed)); }

void cpu_set_isa(Isa isa) {
  TEMPER_CHECK(cpu_isa_supported(isa)) << "ISA " << isa_name(isa) << " is not supported by this CPU";
  active().store(static_cast<int>(isa));
}

std::string_view isa_name(Isa isa) {
  switch (isa) {
    case Isa::scalar: return "scalar";
    case Isa::avx2: return "avx2";
    case Isa::avx512: return "avx512";
  }
  return "?";
}

bool isa_from_name(std::string_view n, Isa* out) {
  for (Isa i : {Isa::scalar, Isa::avx2, Isa::avx512})
    if (isa_name(i) == n) {
      *out = i;
      return true;
    }
  return false;
}

}  // namespace temper
