// The CUDA runtime as temper uses it: is there a device, what is it (name, SMs, memory, peak HBM
// bandwidth for rooflines), errors turned into temper::Error with the failing call and file:line,
// and an owning device buffer. Host code only (cuda_runtime_api.h); kernels live beside it in .cu files.
// Leaves out: multi-device placement policy (the caller picks the device), unified memory.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

namespace temper::cuda {

// True when the driver answers and at least one device is present (false, never a throw, on a
// machine without a GPU: CUDA tests skip on it).
bool available();
int device_count();

struct DeviceInfo {
  int index = 0;
  std::string name;
  int sm_major = 0, sm_minor = 0, sms = 0;
  size_t total_bytes = 0, free_bytes = 0;
  double peak_bandwidth_gbs = 0;  // 2 x memory clock x bus width (0 when the driver does not say)
};
DeviceInfo device_info(int device);

[[noreturn]] void fail(int code, const char* error_string, const char* what, const char* file, int line);
inline void check(cudaError_t e, const char* what, const char* file, int line) {
  if (e != cudaSuccess) fail(static_cast<int>(e), cudaGetErrorString(e), what, file, line);
}
#define TEMPER_CUDA_CHECK(call) ::temper::cuda::check((call), #call, __FILE__, __LINE__)
// After a kernel launch: launch-configuration errors (and, with TEMPER_CUDA_SYNC=1 in the
// environment, execution errors of that kernel, by synchronizing: for debugging).
void check_launch(const char* kernel, const char* file, int line);
#define TEMPER_CUDA_LAUNCHED(name) ::temper::cuda::check_launch((name), __FILE__, __LINE__)

// Owning device memory of n elements of T (cudaMalloc; freed in the destructor). Not copyable.
template <class T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t n) { resize(n); }
  ~DeviceBuffer() { reset(); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& o) noexcept : p_(std::exchange(o.p_, nullptr)), n_(std::exchange(o.n_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) {
      reset();
      p_ = std::exchange(o.p_, nullptr);
      n_ = std::exchange(o.n_, 0);
    }
    return *this;
  }
  void resize(size_t n) {
    reset();
    if (n) TEMPER_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&p_), n * sizeof(T)));
    n_ = n;
  }
  void reset() {
    if (p_) cudaFree(p_);
    p_ = nullptr;
    n_ = 0;
  }
  T* data() const { return p_; }
  size_t size() const { return n_; }
  size_t bytes() const { return n_ * sizeof(T); }

 private:
  T* p_ = nullptr;
  size_t n_ = 0;
};

void copy_to_device(void* dst, const void* src, size_t bytes, cudaStream_t stream = nullptr);
void copy_to_host(void* dst, const void* src, size_t bytes, cudaStream_t stream = nullptr);  // synchronous
void synchronize(cudaStream_t stream = nullptr);

}  // namespace temper::cuda
