// `temper bench roofline` (bench_roofline.h): measured GEMM rates per precision and memory bandwidth.
// Each product is timed from its first call's warm state, best of --reps calls (at least 0.3 s of calls at full
// size): a peak, what an efficiency in docs/PERFORMANCE.md divides by. Bandwidths count bytes as STREAM does
// (copy 2 and triad 3 arrays per pass, no write-allocate traffic): the read is the engine's sumsq kernel, the
// copy memcpy and the triad a = b + 3 c, each on every thread's slice.
#include "temper/app/bench_roofline.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <oneapi/dnnl/dnnl.hpp>
#include <string>
#include <vector>

#include "temper/app/cpu_report.h"
#include "temper/core/error.h"
#include "temper/core/memory_info.h"
#include "temper/core/rng.h"
#include "temper/core/thread_pool.h"
#include "temper/kernels/classifier.h"
#include "temper/kernels/cpu/isa_table.h"
#include "temper/kernels/matmul.h"
#include "temper/model/config.h"

namespace temper::app {
namespace {

namespace tk = kernels;

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// The fastest of at least `reps` calls after one untimed call, calling on until min_s seconds have gone by.
double best_seconds(const std::function<void()>& f, int reps, double min_s) {
  f();
  double best = 1e30, total = 0;
  for (int n = 0; n < reps || (total < min_s && n < 200); ++n) {
    const double t0 = now();
    f();
    const double dt = now() - t0;
    best = std::min(best, dt);
    total += dt;
  }
  return best;
}

// One product C[M,N] = op(A) op(B) as kernels::gemm takes it. fwd: y = x W^T (ta = false, tb = true), the
// shape the forward's packed weights serve.
struct Product {
  std::string name;
  int64_t M, N, K;
  bool ta, tb;
  bool fwd() const { return !ta && tb; }
};

// The square product and SmolLM2-135M's training products at `tokens` rows: per layer the forward of QKV,
// O, gate+up and down, gate+up's dX and dW (the largest block product), and the fused classifier's three on
// one chunk of rows (kernels/classifier.h).
std::vector<Product> products(int64_t square, int64_t tokens) {
  const ModelConfig c = model_config_preset("smollm2-135m");
  const int64_t C = c.hidden_size, F = c.intermediate_size, V = c.vocab_size, Q = c.qkv_dim();
  const int64_t R = tk::classifier_chunk(tokens, V);
  auto dims = [](int64_t n, int64_t k) { return std::to_string(n) + "x" + std::to_string(k); };
  return {
      {"square", square, square, square, false, true},
      {"qkv fwd " + dims(Q, C), tokens, Q, C, false, true},
      {"o fwd " + dims(C, C), tokens, C, C, false, true},
      {"gate_up fwd " + dims(2 * F, C), tokens, 2 * F, C, false, true},
      {"down fwd " + dims(C, F), tokens, C, F, false, true},
      {"gate_up dX", tokens, C, 2 * F, false, false},  // dX[T, C] = dY[T, 2F] W[2F, C]
      {"gate_up dW", 2 * F, C, tokens, true, false},   // dW[2F, C] = dY^T X
      {"classifier fwd " + dims(V, C), R, V, C, false, true},
      {"classifier dX", R, C, V, false, false},  // dH[R, C] = dZ[R, V] W[V, C]
      {"classifier dW", V, C, R, true, false},   // dW[V, C] = dZ^T H
  };
}

// oneDNN's bf16 matmul on operands already in bf16 (plain row-major layouts, f32 output): the library peer,
// as bench/gemm_backends.cpp runs it.
struct DnnlBf16Matmul {
  dnnl::engine eng{dnnl::engine::kind::cpu, 0};
  dnnl::stream strm{eng};
  dnnl::matmul prim;
  dnnl::memory a, b, c;
  DnnlBf16Matmul(const Product& p, uint16_t* A, uint16_t* B, float* Cout) {
    using tag = dnnl::memory::format_tag;
    const auto bf16 = dnnl::memory::data_type::bf16;
    dnnl::memory::desc ad({p.M, p.K}, bf16, p.ta ? tag::ba : tag::ab);
    dnnl::memory::desc bd({p.K, p.N}, bf16, p.tb ? tag::ba : tag::ab);
    dnnl::memory::desc cd({p.M, p.N}, dnnl::memory::data_type::f32, tag::ab);
    prim = dnnl::matmul(dnnl::matmul::primitive_desc(dnnl::matmul::desc(ad, bd, cd), eng));
    a = dnnl::memory(ad, eng, A);
    b = dnnl::memory(bd, eng, B);
    c = dnnl::memory(cd, eng, Cout);
  }
  void run() {
    prim.execute(strm, {{DNNL_ARG_SRC, a}, {DNNL_ARG_WEIGHTS, b}, {DNNL_ARG_DST, c}});
    strm.wait();
  }
};

// GFLOP/s of one product per entry point; 0 where the entry point does not serve it (packed: y = x W^T only,
// and only where kernels::packed_supported()).
struct ProductRates {
  double f32 = 0, bf16 = 0, bf16_packed = 0, onednn_bf16 = 0;
};

ProductRates measure_product(const Product& p, int reps, double min_s) {
  std::vector<float> A(static_cast<size_t>(p.M * p.K)), B(static_cast<size_t>(p.N * p.K)),
      Cm(static_cast<size_t>(p.M * p.N));
  rng_fill_uniform(7, 0, A, -0.5f, 0.5f);
  rng_fill_uniform(7, 1, B, -0.5f, 0.5f);
  const int64_t lda = p.ta ? p.M : p.K, ldb = p.tb ? p.K : p.N;
  const double gflop = 2.0 * static_cast<double>(p.M) * static_cast<double>(p.N) * static_cast<double>(p.K) * 1e-9;
  ProductRates r;
  auto run = [&](tk::Precision prec) {
    tk::gemm(p.ta, p.tb, p.M, p.N, p.K, A.data(), lda, B.data(), ldb, 0.f, Cm.data(), p.N, prec);
  };
  r.f32 = gflop / best_seconds([&] { run(tk::Precision::f32); }, reps, min_s);
  r.bf16 = gflop / best_seconds([&] { run(tk::Precision::bf16); }, reps, min_s);
  if (p.fwd() && tk::packed_supported()) {
    std::vector<uint16_t> wp(static_cast<size_t>(tk::packed_size(p.N, p.K)));
    tk::bf16_pack_weight(B.data(), p.N, p.K, wp.data());
    r.bf16_packed =
        gflop /
        best_seconds([&] { tk::gemm_bf16_packed(p.M, p.N, p.K, A.data(), lda, wp.data(), 0.f, Cm.data(), p.N); }, reps,
                     min_s);
  }
  std::vector<uint16_t> Ab(A.size()), Bb(B.size());
  tk::convert_to_bf16(A.data(), Ab.data(), static_cast<int64_t>(A.size()));
  tk::convert_to_bf16(B.data(), Bb.data(), static_cast<int64_t>(B.size()));
  DnnlBf16Matmul mm(p, Ab.data(), Bb.data(), Cm.data());
  r.onednn_bf16 = gflop / best_seconds([&] { mm.run(); }, reps, min_s);
  for (float v : {Cm[0], Cm[Cm.size() - 1]})
    TEMPER_CHECK(std::isfinite(v)) << "bench roofline: product '" << p.name << "' gave a non-finite value";
  return r;
}

// An uninitialised float buffer, touched first by the threads that will read it (pages placed near them), on
// transparent huge pages where the system gives them (advised before that first write), as the memory a decode step
// reads is (the packed weights, the KV pool): on 4 KiB pages the read measured 63.8 GB/s on Zen 5 while batch-1 f32
// decode read its weights at 108% of that.
std::unique_ptr<float[]> touched(int64_t n, float value) {
  std::unique_ptr<float[]> p(new float[static_cast<size_t>(n)]);
  float* d = p.get();
  advise_huge_pages(d, static_cast<size_t>(n) * sizeof(float));
  parallel_tasks(num_threads(), [&](int64_t t) {
    const int64_t b = n * t / num_threads(), e = n * (t + 1) / num_threads();
    std::fill(d + b, d + e, value);
  });
  return p;
}

// Calls fn(t, begin, end) on each thread t's contiguous slice of [0, n).
template <class F>
void per_thread(int64_t n, const F& fn) {
  const int64_t T = num_threads();
  parallel_tasks(T, [&](int64_t t) { fn(t, n * t / T, n * (t + 1) / T); });
}

struct Bandwidth {
  double read = 0, copy = 0, triad = 0;  // GB/s (1e9 bytes)
  int64_t read_bytes = 0, copy_bytes = 0, triad_bytes = 0;
};

}  // namespace

double read_bandwidth_gbs(double gib, int reps, int64_t* bytes) {
  const int64_t n = std::max<int64_t>(1 << 16, static_cast<int64_t>(gib * 1073741824.0 / 4) / 64 * 64);
  auto buf = touched(n, 1.0f);
  const float* p = buf.get();
  // The engine's sum of squares (the gradient norm's kernel) at the active ISA: one 16-byte load per add, as an
  // SSE2 loop would do here, read at half the rate of 64-byte ones on the AMX Xeon (7 vs 14 GB/s on one core).
  const auto sumsq = tk::isa_table().sumsq;
  std::vector<double> part(static_cast<size_t>(num_threads()) * 8);  // a cache line apart
  const double s = best_seconds(
      [&] {
        per_thread(n, [&](int64_t t, int64_t b, int64_t e) {
          const double sum = sumsq(p + b, e - b);
          part[static_cast<size_t>(t) * 8] = sum;
        });
      },
      reps, 0);
  double total = 0;
  for (double v : part) total += v;
  TEMPER_CHECK(total > 0) << "bench: the read-only sum gave " << total;
  if (bytes) *bytes = n * 4;
  return static_cast<double>(n) * 4 / s * 1e-9;
}

namespace {

Bandwidth measure_bandwidth(double gib, int reps) {
  Bandwidth bw;
  bw.read = read_bandwidth_gbs(gib, reps, &bw.read_bytes);
  const int64_t n = bw.read_bytes / 4;
  const int64_t m = n / 2;
  {
    auto src = touched(m, 2.0f), dst = touched(m, 0.0f);
    const float* s_ = src.get();
    float* d_ = dst.get();
    const double s = best_seconds(
        [&] {
          per_thread(m, [&](int64_t, int64_t b, int64_t e) { std::memcpy(d_ + b, s_ + b, sizeof(float) * (e - b)); });
        },
        reps, 0);
    TEMPER_CHECK(d_[m - 1] == 2.0f) << "bench roofline: the copy did not copy";
    bw.copy_bytes = 2 * m * 4;
    bw.copy = static_cast<double>(bw.copy_bytes) / s * 1e-9;
  }
  {
    auto a = touched(m, 0.0f), b = touched(m, 1.0f), c = touched(m, 2.0f);
    float* __restrict pa = a.get();
    const float* __restrict pb = b.get();
    const float* __restrict pc = c.get();
    const double s = best_seconds(
        [&] {
          per_thread(m, [&](int64_t, int64_t lo, int64_t hi) {
            typedef float V4 __attribute__((vector_size(16)));  // as the read: GCC's -O2 leaves this loop scalar
            int64_t i = lo;
            for (; i + 4 <= hi; i += 4) {
              V4 x, y;
              std::memcpy(&x, pb + i, sizeof x);
              std::memcpy(&y, pc + i, sizeof y);
              x += 3.0f * y;
              std::memcpy(pa + i, &x, sizeof x);
            }
            for (; i < hi; ++i) pa[i] = pb[i] + 3.0f * pc[i];
          });
        },
        reps, 0);
    TEMPER_CHECK(pa[m - 1] == 7.0f) << "bench roofline: the triad gave " << pa[m - 1] << ", expected 7";
    bw.triad_bytes = 3 * m * 4;
    bw.triad = static_cast<double>(bw.triad_bytes) / s * 1e-9;
  }
  return bw;
}

// v to `digits` decimals (a multiple of 10^-digits printed as such in the JSON).
double round_to(double v, int digits) {
  const double scale = std::pow(10.0, digits);
  return std::round(v * scale) / scale;
}

}  // namespace

int bench_roofline(BenchRooflineOptions o) {
  if (o.small) {
    o.square = 256;
    o.tokens = 64;
    o.memory_gib = 1.0 / 16;
    o.reps = 2;
  }
  TEMPER_CHECK(o.square > 0 && o.tokens > 0 && o.memory_gib > 0 && o.reps > 0)
      << "bench roofline: need --square > 0, --tokens > 0, --memory-gib > 0 and --reps > 0";
  if (o.threads > 0) set_num_threads(o.threads);
  const double min_s = o.small ? 0.0 : 0.3;
  nlohmann::json head = {{"bench", "roofline"}, {"engine", "temper"}, {"threads", num_threads()}, {"small", o.small}};
  add_cpu_fields(head);
  if (!o.json)
    std::printf("temper bench roofline: %s, %d threads, isa %s, amx %s, bf16 products %s, f32 gemm %s\n",
                head["cpu"].get<std::string>().c_str(), num_threads(), head["isa"].get<std::string>().c_str(),
                head["amx"].get<bool>() ? "yes" : "no", head["bf16_gemm"].get<std::string>().c_str(),
                head["gemm"].get<std::string>().c_str());
  if (!o.json)
    std::printf("%-30s %6s %6s %6s %9s %9s %12s %12s\n", "GFLOP/s (best of calls)", "M", "N", "K", "f32", "bf16",
                "bf16 packed", "onednn bf16");
  nlohmann::json rows = nlohmann::json::array();
  ProductRates peak;
  auto cell = [](double v) { return v > 0 ? nlohmann::json(round_to(v, 1)) : nlohmann::json(nullptr); };
  for (const Product& p : products(o.square, o.tokens)) {
    const ProductRates r = measure_product(p, o.reps, min_s);
    peak.f32 = std::max(peak.f32, r.f32);
    peak.bf16 = std::max(peak.bf16, r.bf16);
    peak.bf16_packed = std::max(peak.bf16_packed, r.bf16_packed);
    peak.onednn_bf16 = std::max(peak.onednn_bf16, r.onednn_bf16);
    rows.push_back({{"name", p.name},
                    {"M", p.M},
                    {"N", p.N},
                    {"K", p.K},
                    {"ta", p.ta},
                    {"tb", p.tb},
                    {"f32", cell(r.f32)},
                    {"bf16", cell(r.bf16)},
                    {"bf16_packed", cell(r.bf16_packed)},
                    {"onednn_bf16", cell(r.onednn_bf16)}});
    if (!o.json) {
      char packed[32] = "-";
      if (r.bf16_packed > 0) std::snprintf(packed, sizeof packed, "%.1f", r.bf16_packed);
      std::printf("%-30s %6lld %6lld %6lld %9.1f %9.1f %12s %12.1f\n", p.name.c_str(), static_cast<long long>(p.M),
                  static_cast<long long>(p.N), static_cast<long long>(p.K), r.f32, r.bf16, packed, r.onednn_bf16);
      std::fflush(stdout);
    }
  }
  const Bandwidth bw = measure_bandwidth(o.memory_gib, o.reps);
  const double bf16_peak = std::max({peak.bf16, peak.bf16_packed, peak.onednn_bf16});
  nlohmann::json j = head;
  j["products_gflop_s"] = rows;
  j["peak_gflop_s"] = {{"f32", cell(peak.f32)},
                       {"bf16", cell(peak.bf16)},
                       {"bf16_packed", cell(peak.bf16_packed)},
                       {"onednn_bf16", cell(peak.onednn_bf16)}};
  j["memory_gb_s"] = {{"read", round_to(bw.read, 2)}, {"copy", round_to(bw.copy, 2)}, {"triad", round_to(bw.triad, 2)}};
  j["memory_bytes"] = {{"read", bw.read_bytes}, {"copy", bw.copy_bytes}, {"triad", bw.triad_bytes}};
  j["reps"] = o.reps;
  // Arithmetic intensity (FLOP per byte read) above which a product is compute-bound on this machine.
  j["ridge_flop_per_byte"] = {{"f32", round_to(peak.f32 / bw.read, 1)}, {"bf16", round_to(bf16_peak / bw.read, 1)}};
  if (!o.json) {
    std::printf("%-30s %20s %9.1f %9.1f %12.1f %12.1f\n", "peak", "", peak.f32, peak.bf16, peak.bf16_packed,
                peak.onednn_bf16);
    std::printf(
        "memory GB/s (best of %d, %d threads): read %.2f (sum of %.2f GiB), copy %.2f (2 x %.2f GiB), "
        "triad %.2f (3 x %.2f GiB)\n",
        o.reps, num_threads(), bw.read, bw.read_bytes / 1073741824.0, bw.copy, bw.copy_bytes / 2 / 1073741824.0,
        bw.triad, bw.triad_bytes / 3 / 1073741824.0);
    std::printf("ridge (peak / read bandwidth): f32 %.1f, bf16 %.1f FLOP/byte\n", peak.f32 / bw.read,
                bf16_peak / bw.read);
  }
  std::printf("%s\n", j.dump().c_str());
  return 0;
}

}  // namespace temper::app
