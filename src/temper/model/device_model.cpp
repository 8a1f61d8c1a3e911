// make_device_model: "cpu" or "cuda[:N]"; see device_model.h.
#include "temper/model/device_model.h"

#include <cstdio>
#include <cstdlib>

#include "temper/core/error.h"
#include "temper/model/mirror_device.h"
#ifdef TEMPER_WITH_CUDA
#include "temper/kernels/cuda/runtime.h"
#include "temper/model/cuda_transformer.h"
#endif

namespace temper {

namespace {
bool parse_cuda(const std::string& d, int* index) {
  if (d == "cuda") {
    *index = 0;
    return true;
  }
  if (d.rfind("cuda:", 0) != 0 || d.size() == 5) return false;
  int v = 0;
  for (size_t i = 5; i < d.size(); ++i) {
    if (d[i] < '0' || d[i] > '9' || v > 1000) return false;
    v = v * 10 + (d[i] - '0');
  }
  *index = v;
  return true;
}
}  // namespace

void DeviceModel::bind_moments(const void* owner, float* host_m, float* host_v) {
  if (owner_ == owner) return;
  if (owner_) get_moments(owner_m_, owner_v_);
  set_moments(host_m, host_v);
  owner_ = owner;
  owner_m_ = host_m;
  owner_v_ = host_v;
}

void DeviceModel::unbind_moments(const void* owner) {
  if (owner_ == owner) owner_ = owner_m_ = owner_v_ = nullptr;
}

void DeviceModel::forward_paged_choose(const PagedStep&, KvPool&, DeviceChoice*) {
  TEMPER_FAIL() << describe() << ": cannot choose tokens on the device (can_choose() is false)";
}

void DeviceModel::forward_paged_draft(const PagedStep&, KvPool&, const Int4Drafter&) {
  TEMPER_FAIL() << describe() << ": this device does not run the 4-bit drafter; turn speculative decoding off";
}

void DeviceModel::release_moments() {
  if (owner_) get_moments(owner_m_, owner_v_);
  owner_ = owner_m_ = owner_v_ = nullptr;
}

int cuda_devices() {
#ifdef TEMPER_WITH_CUDA
  return cuda::device_count();
#else
  return 0;
#endif
}

std::string cuda_summary() {
#ifdef TEMPER_WITH_CUDA
  const int n = cuda::device_count();
  if (n == 0) return "cuda: built with CUDA, no device visible";
  std::string s = "cuda:";
  for (int i = 0; i < n; ++i) {
    const cuda::DeviceInfo d = cuda::device_info(i);
    char buf[256];
    std::snprintf(buf, sizeof(buf), "%s %d %s (sm_%d%d, %d SMs, %.1f GiB, %.0f GB/s)", i ? ";" : "", i, d.name.c_str(),
                  d.sm_major, d.sm_minor, d.sms, static_cast<double>(d.total_bytes) / (1 << 30), d.peak_bandwidth_gbs);
    s += buf;
  }
  return s;
#else
  return "cuda: not in this build (TEMPER_CUDA=OFF)";
#endif
}

bool device_name_valid(const std::string& device) {
  int i = 0;
  return device == "cpu" || device == "mirror" || parse_cuda(device, &i);
}

std::shared_ptr<DeviceModel> make_device_model(const ModelConfig& cfg, const std::string& device) {
  int index = 0;
  if (device == "cpu") return nullptr;
  if (device == "mirror") return std::make_shared<MirrorDevice>(cfg);
  TEMPER_CHECK(parse_cuda(device, &index)) << "device '" << device << "': expected cpu, cuda, cuda:N or mirror";
#ifdef TEMPER_WITH_CUDA
  return std::make_shared<CudaTransformer>(cfg, index);
#else
  (void)cfg;
  TEMPER_FAIL() << "device '" << device << "': this temper was built without the CUDA backend (TEMPER_CUDA=OFF or "
                << "no nvcc at configure time)";
#endif
}

}  // namespace temper
