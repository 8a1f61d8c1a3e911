// The optimiser step shared by SFT and RL: global grad-norm clipping, then AdamW (torch semantics)
// with the LR schedule, over the model's flat parameter and gradient buffers; moments live in two
// flat buffers. A non-finite gradient norm skips the update (parameters and moments unchanged),
// counts it and lets the run go on; the step counter advances only on applied updates.
// Data-parallel: with a communicator of several ranks, step() first sums the gradients over ranks
// (one flat buffer, bucketed by the communicator), so every rank applies the same update. Sharded
// (ZeRO-1, set_sharded): each rank keeps the AdamW moments of its pieces of the parameters only
// (about 1/N: each of the layout's ranges, ParamLayout::ranges, cut as Communicator::pieces cuts a
// buffer), reduce-scatters the gradients, updates its pieces and all-gathers the weights; checkpoints
// hold the full moments (gather_moments), so a run written by N ranks resumes on M. Sharded gradients
// (ZeRO-2, set_sharded(true, true)): as the backward finishes a range (Transformer::GradSink), the range
// is reduce-scattered, this rank's pieces added to its shard of the update's gradient (kept across
// micro-batches) and the range's pages given back, so a rank holds 1/N of the gradient and about one
// range of the flat buffer (with tied embeddings the embedding's range, written by the LM head first and reduced
// last, beside each layer's); AdamW steps the pieces from that shard. With one backward per update the
// sums are ZeRO-1's, bit for bit; with several, each backward's are summed over ranks first (another
// order: within the data-parallel tolerance).
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "temper/core/settings.h"
#include "temper/core/tensor.h"
#include "temper/dist/communicator.h"
#include "temper/kernels/adamw.h"
#include "temper/model/lr_schedule.h"
#include "temper/model/transformer.h"

namespace temper {

class LoraAdapters;

struct OptimizerConfig {
  kernels::AdamWConfig adamw;
  LrSchedule lr;
  double max_grad_norm = 1.0;  // <= 0: no clipping
};

// The optimiser's recipe keys, in [sft] and [rl] (the schedule's shape is the stage's: it needs its steps).
void visit_optimizer(KeyVisitor& v, kernels::AdamWConfig& adamw, LrSchedule& lr, double& max_grad_norm);

struct OptimizerStep {
  double grad_norm = 0;  // before clipping
  double lr = 0;
  bool skipped = false;  // non-finite gradients: no update
};

class Optimizer : private Transformer::GradSink {
 public:
  Optimizer(Transformer& model, const OptimizerConfig& cfg);
  ~Optimizer();
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;
  OptimizerStep step();  // applies model.grads() (accumulated by the caller)
  // The model's gradients zeroed for an update this optimizer steps (ZeRO-2: it becomes the model's GradSink, so two
  // optimizers of one model, SFT's and RL's, take turns). Call it, not the model's, before the backward passes.
  void zero_grad();
  int64_t steps_done() const { return step_; }
  int64_t skipped() const { return skipped_; }
  void skip();  // an update the caller abandoned (non-finite loss); ZeRO-2: its shard of the gradients dropped
  void restore(int64_t steps_done, int64_t skipped) { step_ = steps_done, skipped_ = skipped; }
  // The AdamW moments (with a device: copied back from it first). After writing them (loading a
  // checkpoint) call moments_updated() so a device gets them too.
  float* m() {
    pull_moments();
    return m_.data<float>();
  }
  float* v() {
    pull_moments();
    return v_.data<float>();
  }
  void moments_updated();
  int64_t size() const { return m_.numel(); }  // moments held here (sharded: this rank's pieces)
  // LoRA: step the adapters' flat buffer (lora.h) instead of the model's (the base frozen; moments restart at
  // zero, sized for the adapters). Null: the model's again. CPU only.
  void train_adapters(LoraAdapters* adapters);
  int64_t trainable_size() const;  // floats stepped: the model's flat size, or the adapters'
  // ZeRO-1 over the communicator (set it first; CPU only). Moments restart at zero. With `gradients`, ZeRO-2: the
  // model's gradients sharded too (the model's own parameters: not with LoRA adapters); the optimizer becomes the
  // model's GradSink until set_sharded(false) or its end.
  void set_sharded(bool on, bool gradients = false);
  bool sharded() const { return sharded_; }
  bool sharded_gradients() const { return shard_grads_; }
  // Collective: every rank calls it once an update's backward passes are done, before any other collective (step()
  // calls it when the caller has not). ZeRO-2: a rank that ran fewer backward passes than another joins that one's
  // reductions with zeros, so the ranks' micro-batches need not match in number. Otherwise nothing.
  void gradients_done();
  // Checkpoints: the full moments (the model's flat size). gather_moments is collective (every rank calls it)
  // and leaves them on `root`, where full_m()/full_v() read them; set_full_moments takes this rank's part of
  // full buffers (every rank).
  void gather_moments(int root);
  const float* full_m() { return sharded() ? gathered_m_.data() : m(); }
  const float* full_v() { return sharded() ? gathered_v_.data() : v(); }
  void set_full_moments(const float* m, const float* v);
  void drop_gathered() {  // after the checkpoint: the root holds only its pieces again
    std::vector<float>().swap(gathered_m_);
    std::vector<float>().swap(gathered_v_);
  }
  const OptimizerConfig& config() const { return cfg_; }
  void set_communicator(dist::Communicator* comm) { comm_ = comm; }
  dist::Communicator* communicator() const { return comm_; }

 private:
  void pull_moments();
  OptimizerStep sharded_step();
  void grads_final(size_t range) override;
  void grads_zeroed() override;
  void reduce_range(size_t range);  // ZeRO-2: range's gradients summed over ranks into acc_, its pages given back
  bool counted(OptimizerStep& s);
  float* trainable();
  float* trainable_grads();
  Transformer& model_;
  LoraAdapters* lora_ = nullptr;
  OptimizerConfig cfg_;
  Tensor m_, v_;
  bool sharded_ = false, shard_grads_ = false;
  std::vector<std::pair<int64_t, int64_t>> ranges_;  // sharded: the layout's ranges (the adapters': one)
  std::vector<std::pair<int64_t, int64_t>> pieces_;  // sharded: this rank's (offset, length) pieces, in order
  // Range i's pieces are pieces_[range_piece_[i], range_piece_[i + 1]); piece k sits at piece_at_[k] in the packed
  // buffers (m_, v_, acc_), whose size is piece_at_.back().
  std::vector<size_t> range_piece_;
  std::vector<int64_t> piece_at_;
  // ZeRO-2: this rank's pieces of the update's gradient, summed over ranks and backward passes (packed as m_; held
  // from the update's first reduction to its step); acc_full_: it holds a whole backward's (false: the next
  // reduction copies instead of adding).
  std::vector<float> acc_;
  bool acc_full_ = false;
  size_t remaining_ = 0;      // ranges the running backward has still to finish (0: none running)
  bool done_ = false;         // gradients_done ran since the update began
  bool update_open_ = false;  // ZeRO-2: zero_grad opened an update that step() / skip() has not closed
  std::vector<float> gathered_m_, gathered_v_;       // sharded: the full moments on the root, for a checkpoint
  int64_t step_ = 0, skipped_ = 0;
  dist::Communicator* comm_ = nullptr;  // null: one process
};

}  // namespace temper
