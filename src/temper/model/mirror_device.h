// A DeviceModel that is the CPU again: its own Transformer, KV pool (replaying the host pool's
// copy-on-write copies on its blocks of the same ids) and AdamW moments. Doing the CPU's arithmetic it
// gives the CPU's results bit for bit, so every path a GPU takes (the engine's paged forward through a
// device, the optimizer's device branch, lazy weight pulls, moments in checkpoints) is tested on any
// machine: `--device mirror` (tests/e2e, test_device_model). Not for production runs: twice the memory.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "temper/kernels/draw.h"
#include "temper/model/device_model.h"
#include "temper/model/kv_pool.h"
#include "temper/model/transformer.h"

namespace temper {

class MirrorDevice final : public DeviceModel {
 public:
  explicit MirrorDevice(const ModelConfig& cfg, bool replay_copies = true);
  std::string describe() const override { return "mirror (a second copy on the CPU)"; }
  void set_params(const float* host) override;
  void get_params(float* host) const override;
  void get_grads(float* host) const override;
  void get_moments(float* m, float* v) const override;
  void set_moments(const float* m, const float* v) override;
  void zero_grad() override { m_.zero_grad(); }
  size_t memory_bytes() const override;
  void plan(int64_t max_tokens, int64_t max_seq) override { m_.plan(max_tokens, max_seq); }
  void set_precision(kernels::Precision p) override { m_.set_precision(p); }
  void set_recompute(bool on) override { m_.set_recompute(on); }
  bool recompute() const { return m_.recompute(); }  // (tests)
  void forward_backward(const int32_t* tokens, const int32_t* targets, int64_t B, int64_t T,
                        const kernels::ClassifierLoss& loss, float* lp, float* ent) override;
  void forward_logprobs(const int32_t* tokens, const int32_t* targets, int64_t B, int64_t T, float* lp,
                        float* ent) override;
  void forward_paged(const PagedStep& st, KvPool& pool) override;
  bool can_choose() const override { return true; }
  void forward_paged_choose(const PagedStep& st, KvPool& pool, DeviceChoice* choices) override;
  void forward_paged_draft(const PagedStep& st, KvPool& pool, const Int4Drafter& drafter) override;
  kernels::Int4Layout int4_layout() const override { return kernels::int4_preferred_layout(); }  // the CPU's
  double optimizer_step(dist::Communicator* comm, const kernels::AdamWConfig& c, float lr, int64_t step,
                        double max_grad_norm) override;
  // What crossed the boundary (tests).
  mutable int pushes = 0, pulls = 0;
  int copies = 0, chosen_steps = 0, drafted_steps = 0;

 private:
  Transformer m_;
  std::unique_ptr<KvPool> mine_;
  std::vector<float> mom_m_, mom_v_, logits_;
  kernels::DrawScratch weights_;
  KvPool& mirror(KvPool& pool);  // this device's pool for the host's, the host's block copies replayed
  bool replay_;
};

}  // namespace temper
