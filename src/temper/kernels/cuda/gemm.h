// Row-major GEMMs on the GPU through cuBLASLt, in temper's (PyTorch) orientation:
// C[M, N] = alpha * op(A) op(B) + beta * C (+ bias[N]), op(A) = A [M, K] or A^T (A stored [K, M]),
// op(B) = B^T for a Linear weight stored [N, K] (trans_b), or B [K, N]. Inputs f32 or bf16 with fp32
// accumulation (bf16 runs on tensor cores; f32 exact, or TF32 when allowed), output f32 or bf16.
// Leaves out: fp8, batched/strided GEMMs, epilogues other than bias.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <map>
#include <memory>
#include <tuple>

#include "temper/kernels/cuda/runtime.h"

namespace temper::cuda {

enum class GemmType : uint8_t { f32, bf16 };

struct GemmArgs {
  bool trans_a = false, trans_b = true;
  int64_t M = 0, N = 0, K = 0;
  const void* A = nullptr;
  int64_t lda = 0;  // row stride of A as stored (K when not trans_a, M when trans_a, or larger)
  const void* B = nullptr;
  int64_t ldb = 0;  // row stride of B as stored (K when trans_b, N otherwise, or larger)
  void* C = nullptr;
  int64_t ldc = 0;
  const void* C_in = nullptr;  // beta != 0: the addend when it is not C itself (C's layout): C = AB + beta C_in
  GemmType ab_type = GemmType::bf16, c_type = GemmType::f32;
  float alpha = 1.f, beta = 0.f;
  const float* bias = nullptr;  // [N] fused epilogue (f32 output only)
  bool allow_tf32 = false;      // f32 inputs: TF32 tensor cores instead of exact fp32
};

// GemmArgs in the CPU gemm()'s argument order (kernels/matmul.h): op(A) [M, K], op(B) [K, N], C [M, N].
inline GemmArgs gemm_args(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, const void* A, int64_t lda,
                          const void* B, int64_t ldb, float beta, void* C, int64_t ldc,
                          GemmType ab = GemmType::bf16, GemmType c = GemmType::f32) {
  GemmArgs g;
  g.trans_a = trans_a;
  g.trans_b = trans_b;
  g.M = M;
  g.N = N;
  g.K = K;
  g.A = A;
  g.lda = lda;
  g.B = B;
  g.ldb = ldb;
  g.beta = beta;
  g.C = C;
  g.ldc = ldc;
  g.ab_type = ab;
  g.c_type = c;
  return g;
}

// The row-major problem is handed to column-major cuBLASLt as C^T = op(B)^T op(A)^T. Each shape's
// descriptors and heuristic algorithm are planned once and reused (decode steps replay them, also
// inside CUDA graphs).
// One cuBLASLt handle, its workspace and the planned shapes; bound to one stream.
class Blas {
 public:
  explicit Blas(cudaStream_t stream = nullptr, size_t workspace_bytes = size_t{32} << 20);
  ~Blas();
  Blas(const Blas&) = delete;
  Blas& operator=(const Blas&) = delete;
  void gemm(const GemmArgs& a);
  cudaStream_t stream() const { return stream_; }
  size_t planned() const { return plans_.size(); }

 private:
  struct Plan;
  using Key = std::tuple<bool, bool, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int, int, bool, bool, bool,
                         uint32_t, uint32_t, uint32_t>;  // ..., pointer alignments of A, B, C
  Plan& plan(const GemmArgs& a);
  cublasLtHandle_t handle_ = nullptr;
  cudaStream_t stream_ = nullptr;
  DeviceBuffer<uint8_t> workspace_;
  std::map<Key, std::unique_ptr<Plan>> plans_;
};

}  // namespace temper::cuda
