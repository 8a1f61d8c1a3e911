// Matrix multiply for training shapes, through a BLAS: C[M,N] = op(A) op(B) + beta*C, row-major.
// op(A) = A^T when ta (A stored [K, M]); op(B) = B^T when tb (B stored [N, K]); a linear layer
// y = x W^T is gemm(false, true, ...). f32 goes to oneDNN's sgemm (default) or OpenBLAS (OpenMP
// build), bf16 to oneDNN's bf16 matmul (what torch.autocast does on CPU); the model's forward
// products use gemm_bf16_packed below instead where the ISA is AVX-512.
#pragma once

#include <cstdint>
#include <string_view>

#include "temper/core/settings.h"

namespace temper::kernels {

// bf16 rounds both inputs to bf16 and multiplies with f32 accumulation and output (what torch.autocast
// does on CPU) on oneDNN's bf16 matmul. oneDNN was faster on every training shape here and gives the
// same bits for 1 and 2 threads; OpenBLAS 0.3.21 does not for small-M*N, long-K products (dW).
// The measurements are in docs/PERFORMANCE.md.
enum class Precision { f32, bf16 };
enum class GemmBackend { openblas, onednn };

GemmBackend gemm_backend();  // TEMPER_GEMM=onednn|openblas, default onednn
void gemm_set_backend(GemmBackend b);
std::string_view gemm_backend_name(GemmBackend b);
bool precision_from_name(std::string_view name, Precision* out);
std::string_view precision_name(Precision p);

// b16 (optional, bf16 precision only): B already rounded to bf16, same layout and ldb as B (a
// weight converted once per optimizer step instead of once per GEMM).
void gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* B, int64_t ldb,
          float beta, float* C, int64_t ldc, Precision precision = Precision::f32, const uint16_t* b16 = nullptr);

// A linear layer's product y = x W^T in the rollout engine's forward (decode and prefill chunks): f32 on
// our decode kernel up to more rows than gemm() gives it (64 with AVX-512; matmul.cpp says why), else gemm().
void gemm_decode(int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* B, int64_t ldb, float beta,
                 float* C, int64_t ldc, Precision precision = Precision::f32, const uint16_t* b16 = nullptr);

// Forward products on weights packed once per update (cpu/gemm_packed.h): each output the plain
// sequential sum over k, whatever the row count or threads. The model's bf16 forward products (so the
// rollout engine's decode gives the training forward's bits) and its f32 decode products; 1.3-1.6x
// the alternatives from a few rows up (docs/PERFORMANCE.md). Where the active ISA is AVX-512 and
// TEMPER_PACKED_GEMM is not 0; elsewhere the model calls gemm() / gemm_decode().
bool packed_supported();
int64_t packed_size(int64_t N, int64_t K);                                   // elements of a packed [N, K]
void f32_pack_weight(const float* W, int64_t N, int64_t K, float* out);      // W [N, K] row-major f32
void bf16_pack_weight(const float* W, int64_t N, int64_t K, uint16_t* out);  // rounded to bf16
// C[M, N] = A W^T (+ C when beta = 1), wp = *_pack_weight(W); bf16 rounds A to bf16 first.
void gemm_f32_packed(int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* wp, float beta,
                     float* C, int64_t ldc);
void gemm_bf16_packed(int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const uint16_t* wp, float beta,
                      float* C, int64_t ldc);

// The bf16 products' path on this CPU: one decision, printed by `temper info` and recorded by the benches.
//   amx:         AMX tiles (cpu/gemm_amx.h) for every bf16 product: the forward's packed weights and gemm()'s;
//   avx512_bf16: AVX512-BF16 dot products (cpu/gemm_dpbf16.h) for the forward's packed weights, oneDNN for gemm()'s;
//   avx512:      the packed AVX-512 kernel (f32 FMAs over bf16 weights) for the forward, oneDNN for gemm()'s;
//   onednn:      oneDNN for every bf16 product (AVX2 and scalar: no packed forward).
// The best the CPU has where the active ISA is AVX-512 (TEMPER_BF16_GEMM=name overrides it); onednn elsewhere.
// Each path gives other bits; within one, a row's outputs never depend on the other rows or the threads. Weights
// packed under one path are read by that path only: switch (tests, benches) before a model packs its weights.
enum class Bf16Path { amx, avx512_bf16, avx512, onednn };
inline constexpr EnumNames<Bf16Path, 4> kBf16PathNames{{{Bf16Path::amx, "amx"},
                                                        {Bf16Path::avx512_bf16, "avx512_bf16"},
                                                        {Bf16Path::avx512, "avx512"},
                                                        {Bf16Path::onednn, "onednn"}}};
Bf16Path bf16_path();
std::string_view bf16_path_name(Bf16Path p);
bool bf16_path_from_name(std::string_view name, Bf16Path* out);
bool bf16_path_supported(Bf16Path p);
void bf16_set_path(Bf16Path p);  // throws where unsupported

// f32 -> bf16 (round to nearest even) of n elements, in parallel.
void convert_to_bf16(const float* x, uint16_t* y, int64_t n);
// x rounded to bf16 in place (to nearest even, kept as f32): `rows` rows of `cols` values, `stride` apart, in parallel.
void round_to_bf16(float* x, int64_t rows, int64_t cols, int64_t stride);

// Reference: the same product in double, for tests.
void gemm_ref(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const double* A, int64_t lda, const double* B,
              int64_t ldb, double beta, double* C, int64_t ldc);

}  // namespace temper::kernels
