// The drafter's GEMMs against the policy's on SmolLM2-135M's shapes: for M rows (the live batch of a draft pass
// or M = B (gamma + 1) of a verify pass), the seconds of one forward's linears (30 layers of q/k/v, o,
// gate/up, down) and of the LM head, in f32 (the policy), bf16 and int4 (the drafter; activations int8), and
// the packed kernels (kernels::gemm_f32_packed / gemm_bf16_packed, where the ISA is AVX-512) next to the
// f32 decode path (gemm_decode: our small-M kernel) and the bf16 one (gemm: oneDNN's bf16 matmul).
// Run: build/bench/int4_gemm [--threads N] [--reps R] [--rows 1,2,4]. Results go to docs/PERFORMANCE.md.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "best_of.h"
#include "temper/core/rng.h"
#include "temper/core/thread_pool.h"
#include "temper/kernels/int4_matmul.h"
#include "temper/kernels/matmul.h"

using namespace temper;
using temper::bench::best_of;
using namespace temper::kernels;

namespace {

struct Shape {
  const char* name;
  int64_t N, K, per_forward;  // outputs, inputs, times per forward
};

}  // namespace

int main(int argc, char** argv) {
  int threads = 2, reps = 5;
  std::vector<int64_t> rows = {1, 2, 4, 6, 8, 16, 32};
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--threads") threads = std::stoi(argv[i + 1]);
    else if (a == "--reps") reps = std::stoi(argv[i + 1]);
    else if (a == "--rows") {
      rows.clear();
      std::string list = argv[i + 1];
      for (size_t p = 0; p < list.size();) {
        size_t q = list.find(',', p);
        rows.push_back(std::stoll(list.substr(p, q - p)));
        p = q == std::string::npos ? list.size() : q + 1;
      }
    }
  }
  set_num_threads(threads);
  const Shape shapes[] = {{"qkv", 960, 576, 30}, {"o", 576, 576, 30}, {"gate_up", 3072, 576, 30}, {"down", 576, 1536, 30},
                          {"lm_head", 49152, 576, 1}};
  std::printf("{\"threads\": %d, \"rows\": [\n", threads);
  bool first = true;
  for (int64_t M : rows) {
    double f32_blocks = 0, bf16_blocks = 0, int4_blocks = 0, f32_head = 0, bf16_head = 0, int4_head = 0;
    double f32p_blocks = 0, bf16p_blocks = 0, f32p_head = 0, bf16p_head = 0, c16_blocks = 0, c16_head = 0;
    const bool packed = packed_supported();
    for (const Shape& s : shapes) {
      std::vector<float> w(static_cast<size_t>(s.N * s.K)), x(static_cast<size_t>(M * s.K)), y(static_cast<size_t>(M * s.N));
      rng_fill_normal(1, 0, std::span<float>(w), 0.f, 0.05f);
      rng_fill_normal(2, 0, std::span<float>(x), 0.f, 1.f);
      std::vector<uint16_t> w16(w.size());
      convert_to_bf16(w.data(), w16.data(), s.N * s.K);
      Int4Weights q;
      quantize_int4(w.data(), s.N, s.K, s.K, s.name == std::string("lm_head") ? 32 : 128, &q);
      double tf = best_of(reps, [&] { gemm_decode(M, s.N, s.K, x.data(), s.K, w.data(), s.K, 0.f, y.data(), s.N); });
      double tb = best_of(reps, [&] { gemm(false, true, M, s.N, s.K, x.data(), s.K, w.data(), s.K, 0.f, y.data(), s.N, Precision::bf16, w16.data()); });
      double t4 = best_of(reps, [&] { int4_gemm(M, x.data(), s.K, q, false, y.data(), s.N); });
      const bool head = s.N == 49152;
      if (int4_cols16_supported()) {  // the drafter's layout with AVX-512 VNNI
        Int4Weights c;
        quantize_int4(w.data(), s.N, s.K, s.K, head ? 32 : 128, &c, Int4Layout::cols16);
        (head ? c16_head : c16_blocks) +=
            s.per_forward * best_of(reps, [&] { int4_gemm(M, x.data(), s.K, c, false, y.data(), s.N); });
      }
      if (packed) {
        std::vector<float> wpf(static_cast<size_t>(packed_size(s.N, s.K)));
        std::vector<uint16_t> wpb(static_cast<size_t>(packed_size(s.N, s.K)));
        f32_pack_weight(w.data(), s.N, s.K, wpf.data());
        bf16_pack_weight(w.data(), s.N, s.K, wpb.data());
        (head ? f32p_head : f32p_blocks) +=
            s.per_forward * best_of(reps, [&] { gemm_f32_packed(M, s.N, s.K, x.data(), s.K, wpf.data(), 0.f, y.data(), s.N); });
        (head ? bf16p_head : bf16p_blocks) +=
            s.per_forward * best_of(reps, [&] { gemm_bf16_packed(M, s.N, s.K, x.data(), s.K, wpb.data(), 0.f, y.data(), s.N); });
      }
      (head ? f32_head : f32_blocks) += tf * s.per_forward;
      (head ? bf16_head : bf16_blocks) += tb * s.per_forward;
      (head ? int4_head : int4_blocks) += t4 * s.per_forward;
    }
    std::printf(
        "%s  {\"M\": %lld, \"blocks_ms\": {\"f32\": %.2f, \"bf16\": %.2f, \"int4\": %.2f, \"int4_cols16\": %.2f, "
        "\"f32_packed\": %.2f, \"bf16_packed\": %.2f}, \"head_ms\": {\"f32\": %.2f, \"bf16\": %.2f, \"int4\": %.2f, "
        "\"int4_cols16\": %.2f, \"f32_packed\": %.2f, \"bf16_packed\": %.2f}}",
        first ? "" : ",\n", static_cast<long long>(M), f32_blocks * 1e3, bf16_blocks * 1e3, int4_blocks * 1e3,
        c16_blocks * 1e3, f32p_blocks * 1e3, bf16p_blocks * 1e3, f32_head * 1e3, bf16_head * 1e3, int4_head * 1e3,
        c16_head * 1e3, f32p_head * 1e3, bf16p_head * 1e3);
    first = false;
  }
  std::printf("\n]}\n");
  return 0;
}
