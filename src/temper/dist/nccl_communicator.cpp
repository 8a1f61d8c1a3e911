// NCCL communicator; see nccl_communicator.h.
#include "temper/dist/nccl_communicator.h"

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>

#include "temper/core/error.h"
#include "temper/kernels/cuda/runtime.h"

namespace temper::dist {

namespace {

void nccl_check(ncclResult_t r, const char* what) {
  TEMPER_CHECK(r == ncclSuccess) << "NCCL error in " << what << ": " << ncclGetErrorString(r);
}

bool on_device(const void* p) {
  cudaPointerAttributes a{};
  if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged;
}

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(Communicator& control, int device) : control_(control), device_(device) {
    TEMPER_CUDA_CHECK(cudaSetDevice(device));
    ncclUniqueId id{};
    std::string bytes;
    if (control.is_root()) {
      nccl_check(ncclGetUniqueId(&id), "ncclGetUniqueId");
      bytes.assign(reinterpret_cast<const char*>(&id), sizeof(id));
    }
    control.broadcast(bytes, 0);
    TEMPER_CHECK(bytes.size() == sizeof(id)) << "NCCL bootstrap: unique id of " << bytes.size() << " bytes";
    std::memcpy(&id, bytes.data(), sizeof(id));
    nccl_check(ncclCommInitRank(&comm_, control.size(), id, control.rank()), "ncclCommInitRank");
    TEMPER_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  }
  ~NcclCommunicator() override {
    if (comm_) ncclCommDestroy(comm_);
    if (stream_) cudaStreamDestroy(stream_);
    if (staging_) cudaFree(staging_);
  }
  int rank() const override { return control_.rank(); }
  int size() const override { return control_.size(); }
  int local_size() const override { return control_.local_size(); }
  const char* backend() const override { return "nccl"; }
  void allreduce_sum(float* data, int64_t n) override { reduce(data, n, ncclFloat32, ncclSum, sizeof(float)); }
  void allreduce_sum(double* data, int64_t n) override { reduce(data, n, ncclFloat64, ncclSum, sizeof(double)); }
  void allreduce_max(double* data, int64_t n) override { reduce(data, n, ncclFloat64, ncclMax, sizeof(double)); }
  void broadcast(float* data, int64_t n, int root) override {
    timed(sizeof(float) * n, [&](void* buf) {
      nccl_check(ncclBroadcast(buf, buf, static_cast<size_t>(n), ncclFloat32, root, comm_, stream_), "ncclBroadcast");
    }, data);
  }
  void broadcast(std::string& bytes, int root) override { control_.broadcast(bytes, root); }
  std::vector<std::string> allgather(const std::string& bytes) override { return control_.allgather(bytes); }
  void barrier() override { control_.barrier(); }
  [[noreturn]] void abort(int code) override {
    if (comm_) ncclCommAbort(comm_);
    comm_ = nullptr;
    control_.abort(code);
    __builtin_unreachable();
  }

 private:
  void reduce(void* data, int64_t n, ncclDataType_t t, ncclRedOp_t op, size_t elem) {
    timed(elem * n, [&](void* buf) {
      nccl_check(ncclAllReduce(buf, buf, static_cast<size_t>(n), t, op, comm_, stream_), "ncclAllReduce");
    }, data);
  }
  // Runs `collective` on device memory: the caller's buffer, or the staging copy of a host buffer.
  template <class F>
  void timed(size_t bytes, F collective, void* data) {
    if (bytes == 0 || size() == 1) return;
    auto t0 = std::chrono::steady_clock::now();
    if (on_device(data)) {
      collective(data);
      TEMPER_CUDA_CHECK(cudaStreamSynchronize(stream_));
    } else {
      if (staging_bytes_ < bytes) {
        if (staging_) cudaFree(staging_);
        TEMPER_CUDA_CHECK(cudaMalloc(&staging_, bytes));
        staging_bytes_ = bytes;
      }
      TEMPER_CUDA_CHECK(cudaMemcpyAsync(staging_, data, bytes, cudaMemcpyHostToDevice, stream_));
      collective(staging_);
      TEMPER_CUDA_CHECK(cudaMemcpyAsync(data, staging_, bytes, cudaMemcpyDeviceToHost, stream_));
      TEMPER_CUDA_CHECK(cudaStreamSynchronize(stream_));
    }
    bytes_ += static_cast<int64_t>(bytes);
    seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }

  Communicator& control_;
  int device_ = 0;
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
  void* staging_ = nullptr;
  size_t staging_bytes_ = 0;
};

}  // namespace

std::unique_ptr<Communicator> make_nccl(Communicator& control, int device) {
  return std::make_unique<NcclCommunicator>(control, device);
}

Communicator& cuda_world() {
  static std::unique_ptr<Communicator> c = [] {
    const int devices = cuda::device_count();
    TEMPER_CHECK(devices > 0) << "NCCL: no CUDA device visible to rank " << world().rank();
    return make_nccl(world(), local_rank() % devices);
  }();
  return *c;
}

}  // namespace temper::dist
