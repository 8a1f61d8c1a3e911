// A copy of a Transformer on an accelerator that runs its heavy passes: the training forward and
// backward, scoring forwards, the rollout engine's paged forward and the optimizer step. The CPU
// Transformer stays the owner of the model (checkpoints, loading, export, the passes a device does
// not run); attach one with Transformer::attach_device and the model delegates to it (weights move
// host -> device when written on the host, device -> host lazily when read on the host).
// The CUDA backend implements it (model/cuda_transformer.h); `--device cuda[:N]` picks it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "temper/dist/communicator.h"
#include "temper/kernels/adamw.h"
#include "temper/kernels/classifier.h"
#include "temper/kernels/int4_matmul.h"
#include "temper/model/config.h"

namespace temper {

struct PagedStep;
class KvPool;
class Int4Drafter;

// One output row's next token chosen on the device (DeviceModel::forward_paged_choose), for rows whose
// sampler is simple (rollout::Sampler::simple): forced, greedy, or temperature with the uniform the
// host drew from the sequence's own stream. The device returns what the host would have computed.
struct DeviceChoice {
  int32_t forced = -1;  // >= 0: take this token (no draw); its sample log-prob is the policy's
  bool greedy = false;
  float temperature = 1.f;
  double u = 0;  // the uniform of the draw
  int32_t token = -1;
  float sample_logprob = 0, policy_logprob = 0, entropy = 0;
};

class DeviceModel {
 public:
  virtual ~DeviceModel() = default;
  virtual std::string describe() const = 0;  // "cuda:0 NVIDIA H200, 139.8 GiB"
  virtual void set_params(const float* host) = 0;
  virtual void get_params(float* host) const = 0;
  virtual void get_grads(float* host) const = 0;
  virtual void get_moments(float* m, float* v) const = 0;
  virtual void set_moments(const float* m, const float* v) = 0;
  virtual void zero_grad() = 0;
  virtual size_t memory_bytes() const = 0;  // what the device holds now (state, activations, KV)
  // Reserve activations for batches of up to max_tokens = B*T tokens, T <= max_seq (passes grow it too).
  virtual void plan(int64_t max_tokens, int64_t max_seq) = 0;
  // The host model's precision (a CPU mirror follows it; the CUDA model computes in bf16 and says so).
  virtual void set_precision(kernels::Precision p) = 0;
  // Per-layer activation recomputation in the training pass (Transformer::set_recompute): only each layer's input
  // is kept from the forward, the rest recomputed layer by layer in the backward.
  virtual void set_recompute(bool on) = 0;
  // As Transformer's; host arrays in and out.
  virtual void forward_backward(const int32_t* tokens, const int32_t* targets, int64_t B, int64_t T,
                                const kernels::ClassifierLoss& loss, float* logprob, float* entropy) = 0;
  virtual void forward_logprobs(const int32_t* tokens, const int32_t* targets, int64_t B, int64_t T, float* logprob,
                                float* entropy) = 0;
  // The rollout engine's step over the host KvPool's block tables; K/V live on the device in blocks
  // of the same ids (the pool's copy-on-write copies are replayed there). Logits land in step.logits.
  virtual void forward_paged(const PagedStep& step, KvPool& pool) = 0;
  // The same step, and each output row's token chosen where the logits are (no logits come back):
  // choices[r] for output row r. Devices that cannot say false in can_choose() (the engine then asks
  // for logits).
  virtual bool can_choose() const { return false; }
  virtual void forward_paged_choose(const PagedStep& step, KvPool& pool, DeviceChoice* choices);
  // The same step through the speculative drafter (model/int4_drafter.h): the block linears on its 4-bit copy,
  // the rest this model's, K/V written to the same blocks (the policy's verify pass overwrites them). Logits land
  // in step.logits. A device that cannot run it says so (an error naming the device).
  virtual void forward_paged_draft(const PagedStep& step, KvPool& pool, const Int4Drafter& drafter);
  // The int4 layout the device's drafter kernels read (the drafter quantizes a device-attached model in it).
  virtual kernels::Int4Layout int4_layout() const { return kernels::Int4Layout::rows; }
  // Whether the device's drafter pass reads the drafter's host bf16 LM head (else the drafter skips making it: a
  // device with its own bf16 copy of the policy's head reads that).
  virtual bool reads_draft_head_bf16() const { return true; }
  // Sums the gradients over `comm` (when it has several ranks), clips to max_grad_norm (<= 0: no
  // clipping), applies AdamW; returns the norm before clipping (non-finite: nothing applied).
  virtual double optimizer_step(dist::Communicator* comm, const kernels::AdamWConfig& c, float lr, int64_t step,
                                double max_grad_norm) = 0;

  // The device holds one set of AdamW moments; several optimizers of one model (SFT's, RL's) take
  // turns. bind_moments makes `owner`'s the resident set: the previous owner's are first copied back
  // into its host buffers, then `owner`'s host buffers are loaded. unbind_moments: `owner` is going away.
  void bind_moments(const void* owner, float* host_m, float* host_v);
  void unbind_moments(const void* owner);
  // Copies the resident moments back to their owner's host buffers and unbinds (the model is leaving
  // this device).
  void release_moments();
  bool holds_moments(const void* owner) const { return owner_ == owner; }

 private:
  const void* owner_ = nullptr;
  float *owner_m_ = nullptr, *owner_v_ = nullptr;
};

// "cpu": none (null). "cuda" or "cuda:N": the CUDA model on device N (an error in a build without
// CUDA, or where the device is missing). "mirror": a second CPU copy behind the device interface
// (model/mirror_device.h: tests every device path on any machine). Anything else: an error.
std::shared_ptr<DeviceModel> make_device_model(const ModelConfig& cfg, const std::string& device);
// Checks the spelling only (for validating recipes without touching a GPU).
bool device_name_valid(const std::string& device);
// CUDA devices visible to this process (0 in a build without CUDA).
int cuda_devices();
// One line for `temper info`: the CUDA devices, or why there are none.
std::string cuda_summary();

}  // namespace temper
