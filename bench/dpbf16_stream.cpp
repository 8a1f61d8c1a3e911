// How fast the AVX512-BF16 products (kernels/cpu/gemm_dpbf16.h, the bf16 forward on CPUs without AMX) stream a
// weight from DRAM at decode-sized row counts: one thread, a packed weight far larger than the caches (SmolLM2's
// LM head, 49152 x 576 bf16: 56.6 MB), GB/s of weight read by the fastest of R passes. At one row a panel's pair row
// is multiplied in ~6 cycles, so the rate shows whether the weight arrives in time (the next-panel prefetch).
// Run: build/bench/dpbf16_stream [--rows 1,8] [--reps 20] [--n 49152] [--k 576]. Results: docs/PERFORMANCE.md.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "best_of.h"
#include "temper/core/cpu_features.h"
#include "temper/kernels/cpu/gemm_dpbf16.h"

using namespace temper;
using temper::bench::best_of;

int main(int argc, char** argv) {
  std::string rows = "1,8";
  int reps = 20;
  int64_t N = 49152, K = 576;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--rows") rows = argv[i + 1];
    if (a == "--reps") reps = std::atoi(argv[i + 1]);
    if (a == "--n") N = std::atoll(argv[i + 1]);
    if (a == "--k") K = std::atoll(argv[i + 1]);
  }
  if (!cpu_features().avx512_bf16) {
    std::printf("dpbf16_stream: this CPU has no AVX512-BF16: nothing to measure\n");
    return 0;
  }
  const int64_t Kp = (K + 31) / 32 * 32, panels = (N + 31) / 32;
  std::vector<uint16_t> W(static_cast<size_t>(panels * 32 * Kp), 0x3f80);  // bf16 1.0: the values do not matter
  for (size_t at = 0; at < rows.size();) {
    const size_t comma = rows.find(',', at);
    const int64_t M = std::atoll(rows.substr(at, comma - at).c_str());
    at = comma == std::string::npos ? rows.size() : comma + 1;
    std::vector<uint16_t> A(static_cast<size_t>(M * Kp), 0x3f80);
    std::vector<float> C(static_cast<size_t>(M * N));
    const double s =
        best_of(reps, [&] { kernels::dpbf16_gemm_block(A.data(), Kp, W.data(), N, C.data(), N, M, 0, panels, false); });
    std::printf("{\"bench\":\"dpbf16_stream\",\"N\":%lld,\"K\":%lld,\"rows\":%lld,\"ms\":%.3f,\"weight_gb_s\":%.2f}\n",
                static_cast<long long>(N), static_cast<long long>(K), static_cast<long long>(M), s * 1e3,
                static_cast<double>(W.size() * sizeof(uint16_t)) / s / 1e9);
    if (C[0] != static_cast<float>(Kp))
      std::printf("dpbf16_stream: wrong product %g (want %lld)\n", C[0], (long long)Kp);
  }
}
