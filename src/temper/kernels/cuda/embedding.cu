// Embedding lookup and its scatter-add backward on the device (see kernels/embedding.h). The
// backward gives each thread one channel and walks the tokens in order, as the CPU kernel does, so
// repeated ids add in a fixed order without atomics.
#include "temper/kernels/cuda/common.cuh"
#include "temper/kernels/cuda/ops.h"

namespace temper::cuda {
namespace {

template <class T>
__global__ void embedding_fwd_kernel(const float* table, const int32_t* ids, T* out, int64_t N, int64_t V, int64_t C,
                                     int* bad_id) {
  for (int64_t idx = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; idx < N * C; idx += int64_t{gridDim.x} * blockDim.x) {
    const int64_t n = idx / C, c = idx % C;
    const int32_t id = ids[n];
    if (id < 0 || id >= V) {
      if (bad_id) *bad_id = 1;
      dev::st(out, idx, 0.f);
    } else {
      dev::st(out, idx, table[int64_t{id} * C + c]);
    }
  }
}

__global__ void embedding_bwd_kernel(const float* dout, const int32_t* ids, float* dtable, int64_t N, int64_t C) {
  const int64_t c = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (c >= C) return;
  for (int64_t n = 0; n < N; ++n) dtable[int64_t{ids[n]} * C + c] += dout[n * C + c];
}

}  // namespace

void embedding_fwd(const float* table, const int32_t* ids, float* out, int64_t N, int64_t V, int64_t C, int* bad_id,
                   cudaStream_t s) {
  if (N * C <= 0) return;
  embedding_fwd_kernel<float><<<dev::blocks_for(N * C, 256), 256, 0, s>>>(table, ids, out, N, V, C, bad_id);
  TEMPER_CUDA_LAUNCHED("embedding_fwd");
}
void embedding_fwd(const float* table, const int32_t* ids, uint16_t* out, int64_t N, int64_t V, int64_t C, int* bad_id,
                   cudaStream_t s) {
  if (N * C <= 0) return;
  embedding_fwd_kernel<__nv_bfloat16><<<dev::blocks_for(N * C, 256), 256, 0, s>>>(table, ids, dev::bf(out), N, V, C, bad_id);
  TEMPER_CUDA_LAUNCHED("embedding_fwd_bf16");
}
void embedding_bwd(const float* dout, const int32_t* ids, float* dtable, int64_t N, int64_t C, cudaStream_t s) {
  if (N * C <= 0) return;
  embedding_bwd_kernel<<<dev::blocks_for(C, 128), 128, 0, s>>>(dout, ids, dtable, N, C);
  TEMPER_CUDA_LAUNCHED("embedding_bwd");
}

}  // namespace temper::cuda
