// The fused classifier on the device (kernels/classifier.h's contract): per chunk of rows, logits =
// h W^T into one [chunk x V] workspace (cuBLASLt), a row kernel for the log-prob of the target and
// the full-vocabulary entropy, then (with a loss) the row's dL/dlogprob and dL/dentropy from the same
// host-side ClassifierLoss every RL method already implements (one small device->host->device
// exchange per chunk), the logits gradient in place, dh = dZ W and dW += dZ^T h. [N x V] never exists.
// Leaves out (checked, clear error): soft targets and reverse-KL targets (logit distillation).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "temper/kernels/classifier.h"
#include "temper/kernels/cuda/gemm.h"
#include "temper/kernels/cuda/runtime.h"

namespace temper::cuda {

// Device scratch and pinned host staging for chunks of up to `chunk_rows` rows over V; sized once.
class ClassifierWorkspace {
 public:
  ClassifierWorkspace(int64_t chunk_rows, int64_t V);
  ~ClassifierWorkspace();
  ClassifierWorkspace(const ClassifierWorkspace&) = delete;
  ClassifierWorkspace& operator=(const ClassifierWorkspace&) = delete;
  int64_t chunk_rows() const { return chunk_; }
  int64_t V() const { return V_; }
  float* logits() const { return logits_.data(); }
  float* lse() const { return lse_.data(); }
  float* coefs() const { return coefs_.data(); }
  float* host() const { return host_; }  // 4 x chunk_rows floats: logprob, entropy, g_lp, g_ent

 private:
  int64_t chunk_ = 0, V_ = 0;
  DeviceBuffer<float> logits_, lse_, coefs_;
  float* host_ = nullptr;
};

struct ClassifierDeviceArgs {
  const float* h = nullptr;           // [N, C] f32
  const float* w = nullptr;           // [V, C] f32
  const uint16_t* h_bf16 = nullptr;   // optional bf16 copies: the logits GEMM on tensor cores
  const uint16_t* w_bf16 = nullptr;
  const int32_t* targets = nullptr;   // [N], -1 = none
  int64_t N = 0, C = 0, V = 0;
  float* logprob = nullptr;  // [N] out (device)
  float* entropy = nullptr;  // [N] out (device)
  const kernels::ClassifierLoss* loss = nullptr;  // host object; null: forward only
  float* dh = nullptr;  // [N, C] overwritten
  float* dw = nullptr;  // [V, C] accumulated
  float softcap = 0.f;  // > 0: final-logit soft-capping z = tanh(z / softcap) * softcap first (Gemma-2)
};
void classifier_fused(Blas& blas, ClassifierWorkspace& ws, const ClassifierDeviceArgs& a);

// kernels::softcap_rows on the device: n logits capped in place with the classifier's own float ops (the
// rollout's capped logits equal training's bit for bit). softcap <= 0: nothing.
void softcap_rows(float* z, int64_t n, float softcap, cudaStream_t s);

}  // namespace temper::cuda
