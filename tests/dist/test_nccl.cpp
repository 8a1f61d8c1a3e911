// The NCCL communicator: on one GPU a group of one (collectives are identities, host and device
// buffers); under `mpirun -np N` on a machine with N GPUs, sums, maxima and broadcasts over ranks
// equal the values computed by hand, for device and host buffers. Skips without a GPU.
#include <gtest/gtest.h>

#include <vector>

#include "temper/dist/communicator.h"
#include "temper/dist/nccl_communicator.h"
#include "temper/kernels/cuda/runtime.h"

namespace temper::dist {
namespace {

TEST(Nccl, CollectivesOverRanksOnHostAndDeviceBuffers) {
  if (!cuda::available()) GTEST_SKIP() << "no CUDA device on this machine";
  Communicator& w = world();
  if (w.size() > cuda::device_count()) GTEST_SKIP() << w.size() << " ranks but " << cuda::device_count() << " GPUs";
  Communicator& c = cuda_world();
  EXPECT_STREQ(c.backend(), "nccl");
  EXPECT_EQ(c.size(), w.size());
  const int r = c.rank(), n = c.size();
  std::vector<float> host(1000);
  for (size_t i = 0; i < host.size(); ++i) host[i] = static_cast<float>(r + 1) * static_cast<float>(i % 7);
  c.allreduce_sum(host.data(), static_cast<int64_t>(host.size()));
  const float ranks_sum = static_cast<float>(n * (n + 1) / 2);
  for (size_t i = 0; i < host.size(); ++i) ASSERT_EQ(host[i], ranks_sum * static_cast<float>(i % 7)) << i;
  cuda::DeviceBuffer<double> dev(3);
  std::vector<double> v = {double(r), -double(r), 1.5};
  cuda::copy_to_device(dev.data(), v.data(), sizeof(double) * 3);
  cuda::synchronize();
  c.allreduce_max(dev.data(), 3);
  cuda::copy_to_host(v.data(), dev.data(), sizeof(double) * 3);
  EXPECT_EQ(v[0], double(n - 1));
  EXPECT_EQ(v[1], 0.0);
  EXPECT_EQ(v[2], 1.5);
  std::vector<float> b(5, static_cast<float>(r));
  c.broadcast(b.data(), 5, n - 1);
  for (float x : b) EXPECT_EQ(x, static_cast<float>(n - 1));
}

}  // namespace
}  // namespace temper::dist
