// The context encoder q(z | recent transitions) of the hierarchy (spec section 7, task inference): an MLP from
// the context window (context_window.h: the last W transitions' 0.25 p, v, reward, valid) to a latent e, trained
// with a reward decoder D(e, query) -> reward of another transition of the same episode (0.25 p, v of the
// query): e must carry what the rewards say about the hidden target (VariBAD's reward decoder, Zintgraf et al.
// 2020, cut to a deterministic latent). The mixture prior over modes is mode_clusters.h, on these latents.
// Parameters [encoder | decoder] in one flat vector with its own AdamW. Leaves out: a stochastic latent and its KL.
#pragma once

#include <cstdint>
#include <vector>

#include "temper/nn/mlp.h"

namespace temper::control {

struct EncoderSpec {
  int64_t context_dim = 48;  // ContextWindow::dim()
  int64_t latent = 4;
  std::vector<int64_t> hidden = {64, 64};
  static constexpr int64_t kQueryDim = 4;  // 0.25 p, v
};

class ContextEncoder {
 public:
  explicit ContextEncoder(EncoderSpec s);
  const EncoderSpec& spec() const { return spec_; }
  int64_t param_count() const { return enc_.param_count() + dec_.param_count(); }
  int64_t encoder_params() const { return enc_.param_count(); }
  void init(float* p, uint64_t seed) const;
  // e [B, latent] for contexts [B, context_dim].
  void encode(const float* p, const float* ctx, int64_t B, float* e) const;
  // One AdamW step on the mean squared reward-prediction error of B (context, query, reward) rows; returns the
  // loss before the step.
  double train_step(float* p, nn::AdamW& opt, float lr, const float* ctx, const float* query, const float* reward,
                    int64_t B) const;

 private:
  EncoderSpec spec_;
  nn::Mlp enc_, dec_;
};

}  // namespace temper::control
