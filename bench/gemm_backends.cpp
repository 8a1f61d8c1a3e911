// Measures the GEMM backends temper can use on this CPU for the training shapes of SmolLM2-135M
// (M = batch*seq tokens; linear layers y = x W^T and their two backward GEMMs), f32 and bf16.
// Debian's OpenBLAS 0.3.21 is built without BUILD_BFLOAT16 (no cblas_sbgemm), so bf16 is oneDNN only.
// The temper columns are the engine's own products from f32 operands (conversion to bf16 included): gemm()
// with bf16 precision, and the forward's products on weights packed once (the AVX-512 kernel, and AMX tiles
// where the CPU has them; kernels/matmul.h's Bf16Path).
// Run: build/bench/gemm_backends [--tokens M] [--threads N]. Results go to docs/PERFORMANCE.md.
#include <cblas.h>
#include <oneapi/dnnl/dnnl.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <oneapi/dnnl/dnnl.hpp>
#include <string>
#include <vector>

#include "temper/core/dtype.h"
#include "temper/core/thread_pool.h"
#include "temper/kernels/matmul.h"

extern "C" void openblas_set_num_threads(int);

namespace {

double seconds_of(const std::function<void()>& f, int reps) {
  f();  // warm
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < reps; ++i) f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / reps;
}

// C[M,N] = op(A) op(B), cached primitive. packed: the weights B reordered once into the layout
// oneDNN prefers (format_tag::any), as a library could do after each optimizer step.
struct DnnlMatmul {
  dnnl::engine eng{dnnl::engine::kind::cpu, 0};
  dnnl::stream strm{eng};
  dnnl::matmul prim;
  dnnl::memory a, b, c;
  DnnlMatmul(int64_t M, int64_t N, int64_t K, dnnl::memory::data_type dt, void* A, void* B, float* C, bool at, bool bt,
             bool packed = false) {
    using tag = dnnl::memory::format_tag;
    dnnl::memory::desc ad({M, K}, dt, at ? tag::ba : tag::ab);
    dnnl::memory::desc bd({K, N}, dt, bt ? tag::ba : tag::ab);
    dnnl::memory::desc bany({K, N}, dt, tag::any);
    dnnl::memory::desc cd({M, N}, dnnl::memory::data_type::f32, tag::ab);
    auto pd = dnnl::matmul::primitive_desc(dnnl::matmul::desc(ad, packed ? bany : bd, cd), eng);
    prim = dnnl::matmul(pd);
    a = dnnl::memory(ad, eng, A);
    b = dnnl::memory(bd, eng, B);
    c = dnnl::memory(cd, eng, C);
    if (packed) {
      dnnl::memory src = b;
      b = dnnl::memory(pd.weights_desc(), eng);
      dnnl::reorder(src, b).execute(strm, src, b);
      strm.wait();
    }
  }
  void run() {
    prim.execute(strm, {{DNNL_ARG_SRC, a}, {DNNL_ARG_WEIGHTS, b}, {DNNL_ARG_DST, c}});
    strm.wait();
  }
};

}  // namespace

int main(int argc, char** argv) {
  int64_t tokens = 2048;
  int threads = 2;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--tokens")) tokens = std::atoll(argv[i + 1]);
    if (!std::strcmp(argv[i], "--threads")) threads = std::atoi(argv[i + 1]);
  }
  openblas_set_num_threads(threads);
  temper::set_num_threads(threads);
  namespace tk = temper::kernels;
  std::printf("bf16 path: %s\n", std::string(tk::bf16_path_name(tk::bf16_path())).c_str());
  struct S { const char* name; int64_t M, N, K; bool ta, tb; };
  // fwd: y[M,N] = x[M,K] W[N,K]^T ; dX[M,K] = dY[M,N] W[N,K] ; dW[N,K] = dY[M,N]^T X[M,K]
  std::vector<S> shapes = {
      {"q/o fwd 576x576", tokens, 576, 576, false, true},
      {"kv fwd 192x576", tokens, 192, 576, false, true},
      {"up fwd 1536x576", tokens, 1536, 576, false, true},
      {"down fwd 576x1536", tokens, 576, 1536, false, true},
      {"up dX", tokens, 576, 1536, false, false},
      {"up dW", 1536, 576, tokens, true, false},
      {"lm_head fwd 49152x576 (256 rows)", 256, 49152, 576, false, true},
  };
  std::printf("%-34s %10s %10s %10s %12s %12s %12s %12s %12s\n", "shape (GFLOP/s)", "oblas f32", "dnnl f32",
              "dnnl bf16", "dnnl packed", "temper bf16", "fwd avx512", "fwd dpbf16", "fwd amx");
  for (auto& s : shapes) {
    int64_t lda = s.ta ? s.M : s.K, ldb = s.tb ? s.K : s.N;
    std::vector<float> A(s.M * s.K), B(s.N * s.K), C(s.M * s.N);
    for (auto& v : A) v = (std::rand() % 1000) * 1e-3f - 0.5f;
    for (auto& v : B) v = (std::rand() % 1000) * 1e-3f - 0.5f;
    std::vector<uint16_t> Ab(A.size()), Bb(B.size());
    for (size_t i = 0; i < A.size(); ++i) Ab[i] = temper::f32_to_bf16(A[i]);
    for (size_t i = 0; i < B.size(); ++i) Bb[i] = temper::f32_to_bf16(B[i]);
    double flop = 2.0 * s.M * s.N * s.K;
    int reps = 5;
    double t1 = seconds_of([&] {
      cblas_sgemm(CblasRowMajor, s.ta ? CblasTrans : CblasNoTrans, s.tb ? CblasTrans : CblasNoTrans, s.M, s.N, s.K,
                  1.f, A.data(), lda, B.data(), ldb, 0.f, C.data(), s.N);
    }, reps);
    double t2 = seconds_of([&] {
      dnnl_sgemm(s.ta ? 'T' : 'N', s.tb ? 'T' : 'N', s.M, s.N, s.K, 1.f, A.data(), lda, B.data(), ldb, 0.f, C.data(), s.N);
    }, reps);
    DnnlMatmul mm(s.M, s.N, s.K, dnnl::memory::data_type::bf16, Ab.data(), Bb.data(), C.data(), s.ta, s.tb);
    double t4 = seconds_of([&] { mm.run(); }, reps);
    DnnlMatmul mp(s.M, s.N, s.K, dnnl::memory::data_type::bf16, Ab.data(), Bb.data(), C.data(), s.ta, s.tb, true);
    double t5 = seconds_of([&] { mp.run(); }, reps);
    double t6 = seconds_of(
        [&] {
          tk::gemm(s.ta, s.tb, s.M, s.N, s.K, A.data(), lda, B.data(), ldb, 0.f, C.data(), s.N, tk::Precision::bf16);
        },
        reps);
    // The forward's packed products (y = x W^T shapes only), each path with its own packed copy.
    auto packed_rate = [&](tk::Bf16Path path) {
      if (s.ta || !s.tb || !tk::packed_supported() || !tk::bf16_path_supported(path)) return 0.0;
      const tk::Bf16Path saved = tk::bf16_path();
      tk::bf16_set_path(path);
      std::vector<uint16_t> wp(static_cast<size_t>(tk::packed_size(s.N, s.K)));
      tk::bf16_pack_weight(B.data(), s.N, s.K, wp.data());
      const double t =
          seconds_of([&] { tk::gemm_bf16_packed(s.M, s.N, s.K, A.data(), lda, wp.data(), 0.f, C.data(), s.N); }, reps);
      tk::bf16_set_path(saved);
      return flop / t * 1e-9;
    };
    const double fa = packed_rate(tk::Bf16Path::avx512), fd = packed_rate(tk::Bf16Path::avx512_bf16),
                 fm = packed_rate(tk::Bf16Path::amx);
    std::printf("%-34s %10.1f %10.1f %10.1f %12.1f %12.1f %12.1f %12.1f %12.1f\n", s.name, flop / t1 * 1e-9,
                flop / t2 * 1e-9, flop / t4 * 1e-9, flop / t5 * 1e-9, flop / t6 * 1e-9, fa, fd, fm);
  }
  return 0;
}
