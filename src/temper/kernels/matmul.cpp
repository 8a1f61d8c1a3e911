#include "temper/kernels/matmul.h"

#include <cblas.h>
#include <omp.h>
#include <oneapi/dnnl/dnnl.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <oneapi/dnnl/dnnl.hpp>
#include <tuple>
#include <vector>

#include "temper/core/dtype.h"
#include "temper/core/error.h"
#include "temper/core/thread_pool.h"
#include "temper/kernels/cpu/gemm_amx.h"
#include "temper/kernels/cpu/gemm_dpbf16.h"
#include "temper/kernels/cpu/gemm_packed.h"
#include "temper/kernels/cpu/isa_table.h"
#include "temper/kernels/gemm_stats.h"

namespace temper::kernels {
namespace {

GemmBackend initial_backend() {
  const char* e = std::getenv("TEMPER_GEMM");
  if (!e || !std::strcmp(e, "onednn")) return GemmBackend::onednn;
  if (!std::strcmp(e, "openblas")) return GemmBackend::openblas;
  TEMPER_FAIL() << "TEMPER_GEMM='" << e << "' is not one of openblas, onednn";
}

GemmBackend& backend_slot() {
  static GemmBackend b = initial_backend();
  return b;
}

// oneDNN bf16 matmul primitives, cached by shape (created once per shape, reused every step).
struct Bf16Key {
  int64_t M, N, K;
  bool ta, tb, acc;
  int64_t ldc, ldb;
  int threads;  // oneDNN fixes its work split when a primitive is created
  auto tie() const { return std::tie(M, N, K, ta, tb, acc, ldc, ldb, threads); }
  bool operator<(const Bf16Key& o) const { return tie() < o.tie(); }
};

// One per thread: two threads of one process multiply at once without waiting for each other (rl.async's explorer
// and trainer), each with its own operand buffers and primitives.
struct Bf16Engine {
  dnnl::engine eng{dnnl::engine::kind::cpu, 0};
  dnnl::stream strm{eng};
  std::map<Bf16Key, dnnl::matmul> cache;
  std::vector<uint16_t> a16, b16;
};

Bf16Engine& bf16_engine() {
  thread_local Bf16Engine e;
  return e;
}

void to_bf16(const float* src, int64_t rows, int64_t cols, int64_t ld, uint16_t* dst) {
  const IsaTable& t = isa_table();
  parallel_for(rows, 64, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) t.f32_to_bf16(src + r * ld, dst + r * cols, cols);
  });
}

// The path an AVX-512 CPU takes (bf16_path() says onednn whatever it holds where the active ISA is not AVX-512).
Bf16Path best_bf16_path() {
  if (amx_usable()) return Bf16Path::amx;
  if (cpu_features().avx512_bf16) return Bf16Path::avx512_bf16;
  return Bf16Path::avx512;
}

Bf16Path initial_bf16_path() {
  const char* e = std::getenv("TEMPER_BF16_GEMM");
  if (!e) return best_bf16_path();
  Bf16Path p;
  TEMPER_CHECK(bf16_path_from_name(e, &p))
      << "TEMPER_BF16_GEMM='" << e << "' is not one of amx, avx512_bf16, avx512, onednn";
  TEMPER_CHECK(bf16_path_supported(p)) << "TEMPER_BF16_GEMM=" << e << " but this CPU cannot take that path";
  return p;
}

std::atomic<Bf16Path>& path_slot() {
  static std::atomic<Bf16Path> p{initial_bf16_path()};
  return p;
}

// The forward's bf16 weights in the tile layout (cpu/gemm_amx.h): the AMX and AVX512-BF16 paths.
bool tile_layout() {
  const Bf16Path p = bf16_path();
  return p == Bf16Path::amx || p == Bf16Path::avx512_bf16;
}

// Ranges of whole 32-output panels, at least 64k multiply-adds per task.
int64_t panel_grain(int64_t M, int64_t K) {
  return std::max<int64_t>(1, 65536 / std::max<int64_t>(1, 32 * M * K));
}

// op(A) [M, K] (ta: A stored [K, M]) rounded to bf16 rows of amx_k_padded(K), the tile layout's left operand, in
// this thread's buffer (grows once, then allocation-free).
const uint16_t* tile_rows(const float* A, int64_t lda, bool ta, int64_t M, int64_t K) {
  thread_local std::vector<uint16_t> a16;
  const int64_t Kp = amx_k_padded(K);
  if (static_cast<int64_t>(a16.size()) < M * Kp) a16.resize(static_cast<size_t>(M * Kp));
  uint16_t* a = a16.data();
  parallel_for((M + 15) / 16, std::max<int64_t>(1, 1024 / Kp),
               [&](int64_t b, int64_t e) { amx_pack_rows(A, lda, !ta, K, 16 * b, std::min(M, 16 * e), a); });
  return a;
}

// gemm()'s bf16 product on AMX: op(B) packed as W' [N, K] and op(A) rounded to bf16 rows, once per call
// (O(MK + NK) against the product's O(MNK)); threads take panels of 32 outputs.
void gemm_bf16_amx(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* B,
                   int64_t ldb, float beta, float* C, int64_t ldc, const uint16_t* b16) {
  TEMPER_CHECK(beta == 0.f || beta == 1.f) << "bf16 gemm supports beta 0 or 1, got " << beta;
  thread_local std::vector<uint16_t> w16;
  const int64_t Kp = amx_k_padded(K), panels = (N + 31) / 32;
  if (static_cast<int64_t>(w16.size()) < amx_packed_elems(N, K))
    w16.resize(static_cast<size_t>(amx_packed_elems(N, K)));
  const uint16_t* a = tile_rows(A, lda, ta, M, K);
  uint16_t* w = w16.data();
  parallel_for(panels, std::max<int64_t>(1, 1024 / Kp), [&](int64_t b, int64_t e) {
    if (b16)
      amx_pack_panels(b16, ldb, tb, N, K, b, e, w);
    else
      amx_pack_panels(B, ldb, tb, N, K, b, e, w);
  });
  parallel_for(panels, panel_grain(M, K),
               [&](int64_t b, int64_t e) { amx_gemm_block(a, Kp, w, N, C, ldc, 0, M, b, e, beta != 0.f); });
}

void gemm_bf16(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* B,
               int64_t ldb, float beta, float* C, int64_t ldc, const uint16_t* b16) {
  TEMPER_CHECK(beta == 0.f || beta == 1.f) << "bf16 gemm supports beta 0 or 1, got " << beta;
  Bf16Engine& e = bf16_engine();
  // Stored orientations: A is [M,K] or (ta) [K,M]; B is [K,N] or (tb) [N,K]. Convert densely.
  int64_t ar = ta ? K : M, ac = ta ? M : K, br = tb ? N : K, bc = tb ? K : N;
  if (static_cast<int64_t>(e.a16.size()) < ar * ac) e.a16.resize(static_cast<size_t>(ar * ac));
  to_bf16(A, ar, ac, lda, e.a16.data());
  const uint16_t* bptr = b16;
  int64_t bld = ldb;
  if (!bptr) {
    if (static_cast<int64_t>(e.b16.size()) < br * bc) e.b16.resize(static_cast<size_t>(br * bc));
    to_bf16(B, br, bc, ldb, e.b16.data());
    bptr = e.b16.data();
    bld = bc;
  }
  using dt = dnnl::memory::data_type;
  dnnl::memory::desc ad({M, K}, dt::bf16, ta ? dnnl::memory::dims{1, M} : dnnl::memory::dims{K, 1});
  dnnl::memory::desc bd({K, N}, dt::bf16, tb ? dnnl::memory::dims{1, bld} : dnnl::memory::dims{bld, 1});
  dnnl::memory::desc cd({M, N}, dt::f32, dnnl::memory::dims{ldc, 1});
  backend_threads();  // oneDNN's team: this thread's count now (a moving ThreadLimit's)
  Bf16Key key{M, N, K, ta, tb, beta != 0.f, ldc, bld, omp_get_max_threads()};
  auto it = e.cache.find(key);
  if (it == e.cache.end()) {
    dnnl::primitive_attr attr;
    if (beta != 0.f) {
      dnnl::post_ops po;
      po.append_sum(1.0f);
      attr.set_post_ops(po);
    }
    dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(ad, bd, cd), attr, e.eng);
    it = e.cache.emplace(key, dnnl::matmul(pd)).first;
  }
  dnnl::memory am(ad, e.eng, e.a16.data()), bm(bd, e.eng, const_cast<uint16_t*>(bptr)), cm(cd, e.eng, C);
  it->second.execute(e.strm, {{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, bm}, {DNNL_ARG_DST, cm}});
  e.strm.wait();
}

// Decode-shaped products (few rows, a weight matrix): our own kernel streams each weight row once
// for all rows and allocates nothing (oneDNN's execute builds an argument map per call). gemm() uses it up
// to 16 rows; gemm_decode() (the rollout engine's forward) up to 64 with AVX-512, where it beats oneDNN's
// sgemm on SmolLM2's shapes (docs/PERFORMANCE.md, "Decode GEMM by rows"; with AVX2 oneDNN is 1.2-1.5x faster
// at 32-64 rows, the scalar kernel is not vectorised). Training keeps 16: its classifier chunks of 17-64 rows
// on the other kernel moved the quickstart's SFT to a different end (held-out 0.087 instead of 0.188) by
// summation order alone. TEMPER_SMALL_GEMM_M=n sets both.
int64_t small_m_env() {
  static const int64_t env = [] {
    const char* e = std::getenv("TEMPER_SMALL_GEMM_M");
    if (!e) return int64_t{-1};
    char* end = nullptr;
    long x = std::strtol(e, &end, 10);
    TEMPER_CHECK(end != e && *end == 0 && x >= 0) << "TEMPER_SMALL_GEMM_M='" << e << "' is not a row count >= 0";
    return static_cast<int64_t>(x);
  }();
  return env;
}
int64_t small_m_max() {
  return small_m_env() >= 0 ? small_m_env() : 16;
}
int64_t decode_small_m_max() {
  if (small_m_env() >= 0) return small_m_env();
  return cpu_isa() == Isa::avx512 ? 64 : 16;
}

bool small_m_ok(float beta, Precision precision) {
  return (beta == 0.f || beta == 1.f) && precision == Precision::f32;
}

void gemm_small_m(int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* B, int64_t ldb,
                  bool accumulate, float* C, int64_t ldc) {
  const IsaTable& t = isa_table();
  const int64_t grain = std::max<int64_t>(16, (N + 63) / 64);
  parallel_for(N, grain, [&](int64_t b, int64_t e) { t.gemm_nt_f32(A, lda, B, ldb, C, ldc, M, b, e, K, accumulate); });
}

// Records the enclosing product's shape and seconds when the benches ask (gemm_stats.h); one branch otherwise.
class StatScope {
 public:
  explicit StatScope(const GemmShape& s) : on_(gemm_stats_enabled()), s_(s) {
    if (on_) t0_ = std::chrono::steady_clock::now();
  }
  ~StatScope() {
    if (on_) gemm_stats_add(s_, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count());
  }

 private:
  bool on_;
  GemmShape s_;
  std::chrono::steady_clock::time_point t0_;
};

}  // namespace

GemmBackend gemm_backend() {
  return backend_slot();
}
void gemm_set_backend(GemmBackend b) {
  backend_slot() = b;
}

std::string_view gemm_backend_name(GemmBackend b) {
  return b == GemmBackend::openblas ? "openblas" : "onednn";
}

bool precision_from_name(std::string_view n, Precision* out) {
  if (n == "f32")
    *out = Precision::f32;
  else if (n == "bf16")
    *out = Precision::bf16;
  else
    return false;
  return true;
}

std::string_view precision_name(Precision p) {
  return p == Precision::f32 ? "f32" : "bf16";
}

void convert_to_bf16(const float* x, uint16_t* y, int64_t n) {
  const IsaTable& t = isa_table();
  parallel_for(n, 1 << 16, [&](int64_t b, int64_t e) { t.f32_to_bf16(x + b, y + b, e - b); });
}

void round_to_bf16(float* x, int64_t rows, int64_t cols, int64_t stride) {
  const IsaTable& t = isa_table();
  parallel_for(rows, 16, [&](int64_t b, int64_t e) {
    uint16_t h[256];  // no allocation: decode steps allocate nothing after their warm-up
    for (int64_t r = b; r < e; ++r)
      for (int64_t c0 = 0; c0 < cols; c0 += 256) {
        float* x0 = x + r * stride + c0;
        const int64_t n = std::min<int64_t>(256, cols - c0);
        t.f32_to_bf16(x0, h, n);
        for (int64_t c = 0; c < n; ++c) x0[c] = bf16_to_f32(h[c]);
      }
  });
}

void gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* B, int64_t ldb,
          float beta, float* C, int64_t ldc, Precision precision, const uint16_t* b16) {
  if (M == 0 || N == 0) return;
  const StatScope stat({GemmKind::gemm, ta, tb, M, N, K, precision});
  if (K == 0) {
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) C[i * ldc + j] = beta == 0.f ? 0.f : beta * C[i * ldc + j];
    return;
  }
  if (!ta && tb && M <= small_m_max() && small_m_ok(beta, precision)) {
    gemm_small_m(M, N, K, A, lda, B, ldb, beta != 0.f, C, ldc);
    return;
  }
  if (precision == Precision::bf16 && bf16_path() == Bf16Path::amx) {
    gemm_bf16_amx(ta, tb, M, N, K, A, lda, B, ldb, beta, C, ldc, b16);
    return;
  }
  if (precision == Precision::bf16) {
    gemm_bf16(ta, tb, M, N, K, A, lda, B, ldb, beta, C, ldc, b16);
    return;
  }
  backend_threads();  // the BLAS's and oneDNN's team: this thread's count now (a moving ThreadLimit's)
  if (backend_slot() == GemmBackend::onednn) {
    dnnl_status_t st = dnnl_sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', M, N, K, 1.f, A, lda, B, ldb, beta, C, ldc);
    TEMPER_CHECK(st == dnnl_success) << "dnnl_sgemm failed with status " << static_cast<int>(st);
    return;
  }
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, static_cast<blasint>(M),
              static_cast<blasint>(N), static_cast<blasint>(K), 1.f, A, static_cast<blasint>(lda), B,
              static_cast<blasint>(ldb), beta, C, static_cast<blasint>(ldc));
}

void gemm_decode(int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* B, int64_t ldb, float beta,
                 float* C, int64_t ldc, Precision precision, const uint16_t* b16) {
  if (M > 0 && N > 0 && K > 0 && M <= decode_small_m_max() && small_m_ok(beta, precision)) {
    gemm_small_m(M, N, K, A, lda, B, ldb, beta != 0.f, C, ldc);
    return;
  }
  gemm(false, true, M, N, K, A, lda, B, ldb, beta, C, ldc, precision, b16);
}

bool packed_supported() {
  static const bool off = [] {
    const char* e = std::getenv("TEMPER_PACKED_GEMM");
    TEMPER_CHECK(!e || !std::strcmp(e, "0") || !std::strcmp(e, "1"))
        << "TEMPER_PACKED_GEMM='" << e << "' is not 0 or 1";
    return e && !std::strcmp(e, "0");
  }();
  return !off && cpu_isa() == Isa::avx512;
}

Bf16Path bf16_path() {
  if (cpu_isa() != Isa::avx512) return Bf16Path::onednn;
  return path_slot().load(std::memory_order_relaxed);
}

std::string_view bf16_path_name(Bf16Path p) {
  return enum_name(kBf16PathNames, p);
}

bool bf16_path_from_name(std::string_view n, Bf16Path* out) {
  const std::optional<Bf16Path> p = enum_from_name(kBf16PathNames, n);
  if (p) *out = *p;
  return p.has_value();
}

bool bf16_path_supported(Bf16Path p) {
  const bool avx512 = cpu_isa_supported(Isa::avx512);
  switch (p) {
    case Bf16Path::amx:
      return amx_usable();
    case Bf16Path::avx512_bf16:
      return avx512 && cpu_features().avx512_bf16;
    case Bf16Path::avx512:
      return avx512;
    case Bf16Path::onednn:
      return true;
  }
  return false;
}

void bf16_set_path(Bf16Path p) {
  TEMPER_CHECK(bf16_path_supported(p)) << "bf16 products on " << bf16_path_name(p) << " asked for, but this CPU cannot";
  path_slot().store(p);
}

// The f32 and bf16 packed copies share this size (the AMX layout pads K to 32: the larger).
int64_t packed_size(int64_t N, int64_t K) {
  return tile_layout() ? amx_packed_elems(N, K) : packed_elems(N, K);
}

void f32_pack_weight(const float* W, int64_t N, int64_t K, float* out) {
  TEMPER_CHECK(packed_supported()) << "f32_pack_weight: packed products need AVX-512";
  parallel_for((N + 31) / 32, 1, [&](int64_t b, int64_t e) { f32_pack_panels(W, K, N, K, b, e, out); });
}

void gemm_f32_packed(int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* wp, float beta,
                     float* C, int64_t ldc) {
  TEMPER_CHECK(beta == 0.f || beta == 1.f) << "gemm_f32_packed supports beta 0 or 1, got " << beta;
  if (M == 0 || N == 0) return;
  const StatScope stat({GemmKind::packed_f32, false, true, M, N, K, Precision::f32});
  parallel_for((N + 31) / 32, panel_grain(M, K),
               [&](int64_t b, int64_t e) { gemm_f32_packed_panels(A, lda, wp, N, K, C, ldc, M, b, e, beta != 0.f); });
}

void bf16_pack_weight(const float* W, int64_t N, int64_t K, uint16_t* out) {
  TEMPER_CHECK(packed_supported()) << "bf16_pack_weight: packed products need AVX-512";
  if (tile_layout()) {
    parallel_for((N + 31) / 32, 1, [&](int64_t b, int64_t e) { amx_pack_panels(W, K, true, N, K, b, e, out); });
    return;
  }
  parallel_for((N + 31) / 32, 1, [&](int64_t b, int64_t e) { bf16_pack_panels(W, K, N, K, b, e, out); });
}

void gemm_bf16_packed(int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const uint16_t* wp, float beta,
                      float* C, int64_t ldc) {
  TEMPER_CHECK(beta == 0.f || beta == 1.f) << "gemm_bf16_packed supports beta 0 or 1, got " << beta;
  if (M == 0 || N == 0) return;
  const StatScope stat({GemmKind::packed_bf16, false, true, M, N, K, Precision::bf16});
  if (tile_layout()) {
    const bool amx = bf16_path() == Bf16Path::amx;
    const int64_t Kp = amx_k_padded(K);
    const uint16_t* a = tile_rows(A, lda, false, M, K);
    parallel_for((N + 31) / 32, panel_grain(M, K), [&](int64_t b, int64_t e) {
      if (amx)
        amx_gemm_block(a, Kp, wp, N, C, ldc, 0, M, b, e, beta != 0.f);
      else
        dpbf16_gemm_block(a, Kp, wp, N, C, ldc, M, b, e, beta != 0.f);
    });
    return;
  }
  thread_local std::vector<float> rounded;  // A rounded to bf16 (grows once, then allocation-free)
  if (static_cast<int64_t>(rounded.size()) < M * K) rounded.resize(static_cast<size_t>(M * K));
  float* a = rounded.data();
  parallel_for(M, std::max<int64_t>(1, 16384 / std::max<int64_t>(1, K)),
               [&](int64_t b, int64_t e) { bf16_round_rows(A + b * lda, lda, e - b, K, a + b * K); });
  parallel_for((N + 31) / 32, panel_grain(M, K),
               [&](int64_t b, int64_t e) { gemm_bf16_packed_panels(a, K, wp, N, K, C, ldc, M, b, e, beta != 0.f); });
}

void gemm_ref(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const double* A, int64_t lda, const double* B,
              int64_t ldb, double beta, double* C, int64_t ldc) {
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double s = 0;
      for (int64_t k = 0; k < K; ++k)
        s += (ta ? A[k * lda + i] : A[i * lda + k]) * (tb ? B[j * ldb + k] : B[k * ldb + j]);
      C[i * ldc + j] = s + (beta == 0 ? 0 : beta * C[i * ldc + j]);
    }
}

}  // namespace temper::kernels
