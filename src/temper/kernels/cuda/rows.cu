// Row and column movements of the device model: bias gradients (column sums, rows in order),
// gathering the rows whose logits are wanted, scattering a vocabulary subset's logits into whole rows, and
// writing new K/V rows into the paged KV cache.
#include "temper/kernels/cuda/common.cuh"
#include "temper/kernels/cuda/ops.h"

namespace temper::cuda {
namespace {

__global__ void column_partial_kernel(const float* x, int64_t N, int64_t C, int64_t ld, float* partial) {
  const int64_t c = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (c >= C) return;
  const int64_t n0 = int64_t{blockIdx.y} * kColumnChunk, n1 = min(N, n0 + kColumnChunk);
  float acc = 0.f;
  for (int64_t n = n0; n < n1; ++n) acc += x[n * ld + c];
  partial[int64_t{blockIdx.y} * C + c] = acc;
}

template <class T>
__global__ void gather_rows_kernel(const T* src, int64_t ld, const int64_t* rows, int64_t n, int64_t C, T* dst) {
  for (int64_t idx = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; idx < n * C; idx += int64_t{gridDim.x} * blockDim.x) {
    const int64_t i = idx / C, c = idx % C;
    dst[idx] = src[rows[i] * ld + c];
  }
}

__global__ void fill_kernel(float* out, int64_t n, float value) {
  for (int64_t idx = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; idx < n; idx += int64_t{gridDim.x} * blockDim.x)
    out[idx] = value;
}

__global__ void scatter_columns_kernel(const float* z, int64_t n, int64_t N, const int32_t* ids, int64_t ld_out,
                                       float* out) {
  for (int64_t idx = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; idx < n * N;
       idx += int64_t{gridDim.x} * blockDim.x) {
    const int64_t i = idx / N, k = idx % N;
    out[i * ld_out + ids[k]] = z[idx];
  }
}

__global__ void kv_write_kernel(const float* k, const float* v, int64_t ld, const int32_t* pos, const int32_t* tables,
                                int64_t table_stride, int64_t n, int64_t row_floats, int64_t block_size, float* k_pool,
                                float* v_pool) {
  for (int64_t idx = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; idx < n * row_floats;
       idx += int64_t{gridDim.x} * blockDim.x) {
    const int64_t i = idx / row_floats, c = idx % row_floats;
    const int64_t p = pos[i];
    const int64_t slot = int64_t{tables[i * table_stride + p / block_size]} * block_size + p % block_size;
    k_pool[slot * row_floats + c] = k[i * ld + c];
    v_pool[slot * row_floats + c] = v[i * ld + c];
  }
}

__global__ void add_partials_kernel(const float* partial, int64_t chunks, int64_t C, float* out) {
  const int64_t c = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (c >= C) return;
  float acc = 0.f;
  for (int64_t k = 0; k < chunks; ++k) acc += partial[k * C + c];
  out[c] += acc;
}

__global__ void decode_advance_kernel(const int32_t* drawn, int32_t* tokens, int32_t* pos, int32_t* kv_len, int64_t n) {
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i >= n) return;
  tokens[i] = drawn[i];
  pos[i] += 1;
  kv_len[i] += 1;
}

}  // namespace

void add_partials(const float* partial, int64_t chunks, int64_t C, float* out, cudaStream_t s) {
  add_partials_kernel<<<dev::blocks_for(C, 128), 128, 0, s>>>(partial, chunks, C, out);
  TEMPER_CUDA_LAUNCHED("column_add_partials");
}

void decode_advance(const int32_t* drawn, int32_t* tokens, int32_t* pos, int32_t* kv_len, int64_t n, cudaStream_t s) {
  if (n <= 0) return;
  decode_advance_kernel<<<dev::blocks_for(n, 128), 128, 0, s>>>(drawn, tokens, pos, kv_len, n);
  TEMPER_CUDA_LAUNCHED("decode_advance");
}

void column_sum_add(const float* x, int64_t N, int64_t C, int64_t ld, float* out, float* workspace, cudaStream_t s) {
  if (C <= 0 || N <= 0) return;
  const int64_t chunks = (N + kColumnChunk - 1) / kColumnChunk;
  column_partial_kernel<<<dim3(dev::blocks_for(C, 128), static_cast<unsigned>(chunks)), 128, 0, s>>>(x, N, C, ld, workspace);
  TEMPER_CUDA_LAUNCHED("column_sum_partial");
  add_partials(workspace, chunks, C, out, s);
}
void gather_rows(const float* src, int64_t ld_src, const int64_t* rows, int64_t n, int64_t C, float* dst,
                 cudaStream_t s) {
  if (n * C <= 0) return;
  gather_rows_kernel<float><<<dev::blocks_for(n * C, 256), 256, 0, s>>>(src, ld_src, rows, n, C, dst);
  TEMPER_CUDA_LAUNCHED("gather_rows");
}
void gather_rows(const uint16_t* src, int64_t ld_src, const int64_t* rows, int64_t n, int64_t C, uint16_t* dst,
                 cudaStream_t s) {
  if (n * C <= 0) return;
  gather_rows_kernel<uint16_t><<<dev::blocks_for(n * C, 256), 256, 0, s>>>(src, ld_src, rows, n, C, dst);
  TEMPER_CUDA_LAUNCHED("gather_rows_bf16");
}
void scatter_columns(const float* z, int64_t n, int64_t N, const int32_t* ids, int64_t V, float fill, float* out,
                     cudaStream_t s) {
  if (n * V <= 0) return;
  fill_kernel<<<dev::blocks_for(n * V, 256), 256, 0, s>>>(out, n * V, fill);
  TEMPER_CUDA_LAUNCHED("scatter_columns_fill");
  if (n * N <= 0) return;
  scatter_columns_kernel<<<dev::blocks_for(n * N, 256), 256, 0, s>>>(z, n, N, ids, V, out);
  TEMPER_CUDA_LAUNCHED("scatter_columns");
}
void kv_write(const float* k, const float* v, int64_t ld, const int32_t* pos, const int32_t* tables,
              int64_t table_stride, int64_t n, int64_t row_floats, int64_t block_size, float* k_pool, float* v_pool,
              cudaStream_t s) {
  if (n * row_floats <= 0) return;
  kv_write_kernel<<<dev::blocks_for(n * row_floats, 256), 256, 0, s>>>(k, v, ld, pos, tables, table_stride, n,
                                                                       row_floats, block_size, k_pool, v_pool);
  TEMPER_CUDA_LAUNCHED("kv_write");
}

}  // namespace temper::cuda
