// Decode-sized bf16 products; see gemv.h.
#include "temper/core/error.h"
#include "temper/kernels/cuda/common.cuh"
#include "temper/kernels/cuda/gemv.h"

namespace temper::cuda {
namespace {

constexpr int kWarps = 8;
constexpr int kBatch = 4;  // 16-byte weight loads per lane issued together (a K of 896 takes one batch)

__device__ __forceinline__ void unpack8(const uint4& u, float* f) {
  const uint32_t w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    f[2 * i] = __uint_as_float(w[i] << 16);  // low half: the element at the lower address
    f[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
  }
}

template <int M>
__global__ void gemv_kernel(int64_t N, int64_t K, const uint16_t* __restrict__ x, const uint16_t* __restrict__ w,
                            const float* __restrict__ bias, float beta, const float* c_in, float* y) {
  const int lane = threadIdx.x & 31;
  const int64_t warps_total = int64_t{gridDim.x} * kWarps;
  const int64_t K8 = K / 8;
  const uint4* x4 = reinterpret_cast<const uint4*>(x);
  for (int64_t n = int64_t{blockIdx.x} * kWarps + (threadIdx.x >> 5); n < N; n += warps_total) {
    const uint4* w4 = reinterpret_cast<const uint4*>(w + n * K);
    float acc[M];
#pragma unroll
    for (int m = 0; m < M; ++m) acc[m] = 0.f;
    for (int64_t base = lane; base < K8; base += 32 * kBatch) {
      uint4 wv[kBatch];  // kBatch weight loads in flight before the first use
#pragma unroll
      for (int u = 0; u < kBatch; ++u) {
        const int64_t k8 = base + 32 * u;
        wv[u] = k8 < K8 ? __ldg(w4 + k8) : make_uint4(0, 0, 0, 0);
      }
#pragma unroll
      for (int u = 0; u < kBatch; ++u) {
        const int64_t k8 = base + 32 * u;
        if (k8 < K8) {
          float wf[8];
          unpack8(wv[u], wf);
#pragma unroll
          for (int m = 0; m < M; ++m) {
            float xf[8];
            unpack8(__ldg(x4 + m * K8 + k8), xf);
#pragma unroll
            for (int i = 0; i < 8; ++i) acc[m] = fmaf(xf[i], wf[i], acc[m]);
          }
        }
      }
    }
#pragma unroll
    for (int m = 0; m < M; ++m) acc[m] = dev::warp_sum(acc[m]);
    if (lane < M) {
      float v = 0.f;
#pragma unroll
      for (int m = 0; m < M; ++m)
        if (m == lane) v = acc[m];
      if (bias) v += bias[n];
      if (beta != 0.f) v += beta * (c_in ? c_in : y)[lane * N + n];
      y[lane * N + n] = v;
    }
  }
}

template <int M>
void launch(int64_t N, int64_t K, const uint16_t* x, const uint16_t* w, const float* bias, float beta,
            const float* c_in, float* y, cudaStream_t s) {
  const int64_t blocks = (N + kWarps - 1) / kWarps;
  gemv_kernel<M><<<static_cast<unsigned>(blocks < 65535 * 16 ? blocks : 65535 * 16), kWarps * 32, 0, s>>>(
      N, K, x, w, bias, beta, c_in, y);
}

bool aligned16(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % 16 == 0;
}

}  // namespace

bool gemv_fits(int64_t M, int64_t K, const void* x, const void* w) {
  return M >= 1 && M <= kGemvMaxRows && K > 0 && K % 8 == 0 && aligned16(x) && aligned16(w);
}

void gemv_bf16(int64_t M, int64_t N, int64_t K, const uint16_t* x, const uint16_t* w, const float* bias, float beta,
               const float* c_in, float* y, cudaStream_t s) {
  TEMPER_CHECK(gemv_fits(M, K, x, w) && N > 0) << "gemv_bf16: M=" << M << " (1.." << kGemvMaxRows << "), K=" << K
                                               << " (a multiple of 8), N=" << N << ", operands 16-byte aligned";
  using Launch = void (*)(int64_t, int64_t, const uint16_t*, const uint16_t*, const float*, float, const float*, float*,
                          cudaStream_t);
  static constexpr Launch kByRows[kGemvMaxRows] = {launch<1>, launch<2>, launch<3>, launch<4>,
                                                   launch<5>, launch<6>, launch<7>, launch<8>};
  kByRows[M - 1](N, K, x, w, bias, beta, c_in, y, s);
  TEMPER_CUDA_LAUNCHED("gemv_bf16");
}

}  // namespace temper::cuda
