// Int4 dequantize-matmul on the device; see int4_matmul.h. w = scale * (q - zero) per group.
#include "temper/core/error.h"
#include "temper/kernels/cuda/common.cuh"
#include "temper/kernels/cuda/int4_matmul.h"

namespace temper::cuda {
namespace {

constexpr int kRows = 8;   // activation rows per pass
constexpr int kWarps = 4;  // output columns per block

// Y[m, n] = sum_k X[m, k] w[n, k] + (bias ? bias[n] : 0) + (addend ? addend[m * ldy + n] : accumulate ? Y : 0).
template <class TX>
__global__ void int4_gemm_kernel(int64_t M, const TX* X, int64_t ldx, int64_t N, int64_t K, int64_t Kp, int64_t group,
                                 const uint8_t* q, const float* scale, const uint8_t* zero, bool accumulate, float* Y,
                                 int64_t ldy, const float* bias, const float* addend) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t n = int64_t{blockIdx.x} * kWarps + warp;
  if (n >= N) return;
  const int64_t chunks = Kp / 32, groups = Kp / group;
  const uint8_t* qn = q + n * (Kp / 2);
  for (int64_t m0 = 0; m0 < M; m0 += kRows) {
    float acc[kRows];
    for (int r = 0; r < kRows; ++r) acc[r] = 0.f;
    for (int64_t c = lane; c < chunks; c += 32) {
      const int64_t g = (c * 32) / group;
      const float sc = scale[n * groups + g], zp = static_cast<float>(zero[n * groups + g]);
      float w[32];
      for (int j = 0; j < 16; ++j) {
        const uint8_t byte = qn[c * 16 + j];
        w[j] = sc * (static_cast<float>(byte & 0xF) - zp);
        w[j + 16] = sc * (static_cast<float>(byte >> 4) - zp);
      }
      for (int r = 0; r < kRows; ++r) {
        const int64_t m = m0 + r;
        if (m >= M) break;
        const TX* xr = X + m * ldx + c * 32;
        float s = 0.f;
        for (int j = 0; j < 32; ++j)
          if (c * 32 + j < K) s += w[j] * dev::ld(xr, j);
        acc[r] += s;
      }
    }
    for (int r = 0; r < kRows; ++r) {
      const float s = dev::warp_sum(acc[r]);
      const int64_t m = m0 + r;
      if (lane != 0 || m >= M) continue;
      float y = s + (bias ? bias[n] : 0.f);
      if (addend)
        y += addend[m * ldy + n];
      else if (accumulate)
        y += Y[m * ldy + n];
      Y[m * ldy + n] = y;
    }
  }
}

template <class TX>
void launch(int64_t M, const TX* X, int64_t ldx, const Int4DeviceWeights& W, bool accumulate, float* Y, int64_t ldy,
            const float* bias, const float* addend, cudaStream_t s) {
  TEMPER_CHECK(W.Kp % 32 == 0 && W.group % 32 == 0 && W.Kp % W.group == 0)
      << "CUDA int4 GEMM: padded K " << W.Kp << " and group " << W.group << " must be multiples of 32";
  if (M == 0 || W.N == 0) return;
  int4_gemm_kernel<TX><<<static_cast<unsigned>((W.N + kWarps - 1) / kWarps), kWarps * 32, 0, s>>>(
      M, X, ldx, W.N, W.K, W.Kp, W.group, W.q(), W.scale(), W.zero(), accumulate, Y, ldy, bias, addend);
  TEMPER_CUDA_LAUNCHED("int4_gemm");
}

}  // namespace

Int4DeviceWeights::Int4DeviceWeights(const kernels::Int4Weights& w) {
  upload(w);
}

void Int4DeviceWeights::upload(const kernels::Int4Weights& w) {
  TEMPER_CHECK(w.layout == kernels::Int4Layout::rows)
      << "CUDA int4: the weights must be in the rows layout (quantize_int4's default)";
  N = w.N;
  K = w.K;
  Kp = w.Kp;
  group = w.group;
  if (q_.size() != w.q.size()) q_.resize(w.q.size());  // the same shape again (a refresh): the same buffers
  if (zero_.size() != w.zero.size()) zero_.resize(w.zero.size());
  if (scale_.size() != w.scale.size()) scale_.resize(w.scale.size());
  copy_to_device(q_.data(), w.q.data(), w.q.size());
  copy_to_device(zero_.data(), w.zero.data(), w.zero.size());
  copy_to_device(scale_.data(), w.scale.data(), w.scale.size() * sizeof(float));
  synchronize();
}

void int4_gemm(int64_t M, const float* X, int64_t ldx, const Int4DeviceWeights& W, bool accumulate, float* Y,
               int64_t ldy, cudaStream_t s) {
  launch(M, X, ldx, W, accumulate, Y, ldy, nullptr, nullptr, s);
}

void int4_gemm_bf16(int64_t M, const uint16_t* X, int64_t ldx, const Int4DeviceWeights& W, float* Y, int64_t ldy,
                    const float* bias, const float* addend, cudaStream_t s) {
  launch(M, dev::bf(X), ldx, W, false, Y, ldy, bias, addend, s);
}

}  // namespace temper::cuda
