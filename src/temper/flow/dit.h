// A small DiT/SiT-style transformer over image patches as a VelocityModel (Peebles & Xie 2023; SiT, Ma et
// al. 2024, trains the same network as a velocity field): patch embedding plus the fixed 2-D sin-cos
// position embedding, c = timestep embedding (sinusoid of t * t_scale, Linear, SiLU, Linear) + class
// embedding (label `classes` is the null label of classifier-free guidance), adaLN-Zero blocks
// (dit_block.h), the final adaLN layer and a linear layer to patches, unpatchify. Parameters in one flat
// vector in torch's state_dict layout (dit_layout.h); checked against tools/ref/make_dit_golden.py.
// Leaves out: learned sigma (DiT's extra output channels), dropout of labels (the trainer's business).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "temper/flow/dit_block.h"
#include "temper/flow/dit_config.h"
#include "temper/flow/dit_layout.h"
#include "temper/flow/velocity_model.h"

namespace temper::flow {

class Dit final : public VelocityModel {
 public:
  explicit Dit(DitConfig c);  // validates c; parameters zero until init_params or params() is written

  int64_t dim() const override { return cfg_.dim(); }
  int64_t classes() const override { return cfg_.classes; }
  int64_t param_count() const override { return layout_.total; }
  std::span<float> params() override { return params_; }
  std::span<const float> params() const override { return params_; }
  // DiT's initialize_weights, drawn from Philox (seed, stream = tensor index): xavier-uniform linear weights
  // (the patch embedding's as [hidden, C*p*p]), zero biases, N(0, 0.02) for the class table and the timestep
  // MLP's weights, zero adaLN modulations and final linear layer (adaLN-Zero: every block starts as identity).
  void init_params(uint64_t seed) override;
  void forward(const float* x, const float* t, const int32_t* y, int64_t B, float* v, bool train) override;
  void backward(const float* dv, float* grad) override;
  std::vector<std::pair<std::string, std::vector<int64_t>>> param_shapes() const override { return layout_.shapes; }

  const DitConfig& config() const { return cfg_; }
  const DitLayout& layout() const { return layout_; }

 private:
  // Activations of one forward (the training one is kept apart from sampling's).
  struct Tape {
    int64_t B = 0;
    std::vector<int32_t> y;
    std::vector<float> patches, freq, t_pre, t_act, c, sc;  // [N, C*p*p], [B, freq], [B, C] x 4
    std::vector<DitBlockTape> blocks;
    std::vector<float> x, fmod, hf, rstdf, af, out;  // residual stream, final adaLN [B, 2C], [N, C] x 2, [N, p*p*C]
  };
  void forward_tape(const float* x, const float* t, const int32_t* y, int64_t B, float* v, Tape& tape);
  void embed_conditions(const float* t, const int32_t* y, Tape& tape);
  void backward_conditions(const Tape& tape, float* dsc, float* grad);

  DitConfig cfg_;
  DitLayout layout_;
  std::vector<float> params_;
  std::vector<float> pos_;  // [T, C]
  Tape train_, eval_;
  bool has_train_ = false;
  DitBlockScratch scratch_;
  std::vector<float> dx_, dtok_, dout_, dsc_, dfmod_;
};

}  // namespace temper::flow
