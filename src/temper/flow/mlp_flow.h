// The 2-D MLP flow: a VelocityModel for small vector data (the spec's miniature, tests with known
// densities). v(x, t, y) = MLP([x, time embedding of t, class embedding of y]): the time embedding is
// [cos(w_k t), sin(w_k t)] for w_k = 1000^{k / (F - 1)}, k < F (fixed); the class embedding a learned table
// [classes + 1, E] whose last row is the null label (classifier-free guidance). Parameters: the MLP's (nn::Mlp
// layout, torch.nn.Linear's init), then the table (torch.nn.Embedding's N(0, 1) init). The PyTorch twin is
// tools/ref/make_flow_golden.py.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "temper/core/settings.h"
#include "temper/flow/velocity_model.h"
#include "temper/nn/mlp.h"

namespace temper::flow {

struct MlpFlowConfig {
  int64_t dim = 2;           // elements of x
  int64_t classes = 1;       // labels 0..classes-1; `classes` is the null label
  int64_t hidden = 128;      // width of each hidden layer
  int64_t depth = 3;         // hidden layers
  int64_t time_freqs = 8;    // F
  int64_t class_dim = 8;     // E
  std::string act = "silu";  // the hidden layers' activation: relu | tanh | silu
  int64_t in() const { return dim + 2 * time_freqs + class_dim; }
  void validate() const;
  void visit(KeyVisitor& v);  // the [model] keys of kind = "mlp2d"
};

class MlpFlow final : public VelocityModel {
 public:
  explicit MlpFlow(MlpFlowConfig c);
  const MlpFlowConfig& config() const { return cfg_; }
  int64_t dim() const override { return cfg_.dim; }
  int64_t classes() const override { return cfg_.classes; }
  int64_t param_count() const override { return static_cast<int64_t>(params_.size()); }
  std::span<float> params() override { return params_; }
  std::span<const float> params() const override { return params_; }
  void init_params(uint64_t seed) override;
  void forward(const float* x, const float* t, const int32_t* y, int64_t B, float* v, bool train) override;
  void backward(const float* dv, float* grad) override;
  std::vector<std::pair<std::string, std::vector<int64_t>>> param_shapes() const override;

  // The network's input rows [B, in()] for (x, t, y).
  void input_rows(const float* x, const float* t, const int32_t* y, int64_t B, float* rows) const;

 private:
  MlpFlowConfig cfg_;
  nn::Mlp mlp_;
  std::vector<float> params_;
  nn::Mlp::Tape tape_;
  std::vector<int32_t> tape_y_;
  std::vector<float> rows_, dx_;
};

}  // namespace temper::flow
