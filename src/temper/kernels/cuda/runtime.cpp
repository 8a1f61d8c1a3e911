// CUDA runtime helpers: device query, error reporting, copies. See runtime.h.
#include "temper/kernels/cuda/runtime.h"

#include <cstdlib>
#include <cstring>
#include <sstream>

#include "temper/core/error.h"

namespace temper::cuda {

int device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no driver / no device" error
    return 0;
  }
  return n;
}

bool available() { return device_count() > 0; }

DeviceInfo device_info(int device) {
  DeviceInfo d;
  d.index = device;
  cudaDeviceProp p{};
  TEMPER_CUDA_CHECK(cudaGetDeviceProperties(&p, device));
  d.name = p.name;
  d.sm_major = p.major;
  d.sm_minor = p.minor;
  d.sms = p.multiProcessorCount;
  int clock_khz = 0, bus_bits = 0;
  if (cudaDeviceGetAttribute(&clock_khz, cudaDevAttrMemoryClockRate, device) == cudaSuccess &&
      cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, device) == cudaSuccess)
    d.peak_bandwidth_gbs = 2.0 * clock_khz * 1e3 * (bus_bits / 8.0) / 1e9;
  else
    cudaGetLastError();
  int saved = 0;
  TEMPER_CUDA_CHECK(cudaGetDevice(&saved));
  TEMPER_CUDA_CHECK(cudaSetDevice(device));
  TEMPER_CUDA_CHECK(cudaMemGetInfo(&d.free_bytes, &d.total_bytes));
  TEMPER_CUDA_CHECK(cudaSetDevice(saved));
  return d;
}

void fail(int code, const char* error_string, const char* what, const char* file, int line) {
  std::ostringstream os;
  os << "CUDA error " << code << " (" << (error_string ? error_string : "?") << ") in " << what << " at " << file << ":"
     << line;
  throw Error(os.str());
}

void check_launch(const char* kernel, const char* file, int line) {
  check(cudaGetLastError(), kernel, file, line);
  static const bool sync = [] {
    const char* e = std::getenv("TEMPER_CUDA_SYNC");
    return e && std::strcmp(e, "1") == 0;
  }();
  if (sync) check(cudaDeviceSynchronize(), kernel, file, line);
}

void copy_to_device(void* dst, const void* src, size_t bytes, cudaStream_t stream) {
  if (bytes) TEMPER_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream));
}

void copy_to_host(void* dst, const void* src, size_t bytes, cudaStream_t stream) {
  if (!bytes) return;
  TEMPER_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream));
  TEMPER_CUDA_CHECK(cudaStreamSynchronize(stream));
}

void synchronize(cudaStream_t stream) { TEMPER_CUDA_CHECK(cudaStreamSynchronize(stream)); }

}  // namespace temper::cuda
