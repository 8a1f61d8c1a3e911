// `temper bench cuda`: the GPU measurements of scripts/gpu-check, one JSON line each, on a built-in
// shape with random weights (default Qwen2.5-0.5B's). `train`: forward + backward + AdamW of the
// device model at bf16, tokens/s and MFU against the device's dense bf16 peak. `decode`: tokens/s of
// decode steps on the paged device KV cache (sampling on the device, CUDA graphs) at each batch,
// with batch 1 against the HBM bandwidth roofline. `gemm`: cuBLASLt bf16 TFLOP/s at the model's
// training GEMM shapes. In a build without the CUDA backend it says so and fails.
#pragma once

#include <cstdint>
#include <string>

namespace temper::app {

struct BenchCudaOptions {
  std::string what = "all";  // train, decode, gemm, all
  std::string shape = "qwen2.5-0.5b";
  int device = 0;
  int64_t batch = 8, seq = 1024;  // train
  std::string batches = "1,64,256";
  int64_t gen_len = 128;  // decode steps per batch
  int steps = 5, warmup = 2;
  bool graph = true;
  double peak_tflops = 0;  // 0: from the device name (H100/H200 989, A100 312)
};

int bench_cuda(const BenchCudaOptions& o);

}  // namespace temper::app
