// Dense layers on our kernels for the systems beyond language models (flow matching, control, value
// networks): a multi-layer perceptron over one flat parameter vector, its backward, and AdamW over that
// vector. Each layer is torch.nn.Linear (y = x W^T + b, W [out, in] row-major, then b [out]), followed by the
// activation; the products go through kernels::gemm (f32), so a row's outputs never depend on the batch or
// the thread count. Leaves out: dropout, normalisation layers, other precisions.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "temper/core/settings.h"
#include "temper/kernels/adamw.h"

namespace temper::nn {

enum class Act { identity, relu, tanh, silu };
inline constexpr EnumNames<Act, 4> kActNames{
    {{Act::identity, "identity"}, {Act::relu, "relu"}, {Act::tanh, "tanh"}, {Act::silu, "silu"}}};

// y = act(x) elementwise, and dx = dy * act'(x) given the pre-activation x.
void activate(Act a, const float* x, float* y, int64_t n);
void activate_backward(Act a, const float* x, const float* dy, float* dx, int64_t n);

struct MlpSpec {
  std::vector<int64_t> sizes;  // in, hidden..., out (at least two)
  Act hidden = Act::tanh;      // after every layer but the last
  Act output = Act::identity;  // after the last
};

class Mlp {
 public:
  explicit Mlp(MlpSpec s);  // throws on fewer than two sizes or a size < 1

  int64_t in() const { return spec_.sizes.front(); }
  int64_t out() const { return spec_.sizes.back(); }
  int64_t layers() const { return static_cast<int64_t>(spec_.sizes.size()) - 1; }
  int64_t param_count() const { return offsets_.back(); }
  const MlpSpec& spec() const { return spec_; }

  // torch.nn.Linear's default distribution, U(-1/sqrt(in), 1/sqrt(in)) for W and b, drawn from Philox
  // (seed, stream = parameter index): the same numbers for any thread count, not torch's stream.
  void init(float* p, uint64_t seed) const;
  // (name, shape) of each tensor in the layout of p: prefix.0.weight [out, in], prefix.0.bias [out], ...
  std::vector<std::pair<std::string, std::vector<int64_t>>> param_shapes(const std::string& prefix) const;

  // What backward needs: each layer's input and pre-activation, for `rows` rows.
  struct Tape {
    int64_t rows = 0;
    std::vector<std::vector<float>> inputs, pre;
  };
  // y [B, out] for x [B, in]; fills tape when given.
  void forward(const float* p, const float* x, int64_t B, float* y, Tape* tape = nullptr) const;
  // grad[param_count()] += d loss / d p for dy = d loss / d y [tape.rows, out]; dx [rows, in] = d loss / d x when
  // not null.
  void backward(const float* p, const Tape& tape, const float* dy, float* grad, float* dx = nullptr) const;

 private:
  const float* weight(const float* p, int64_t l) const { return p + offsets_[l]; }
  const float* bias(const float* p, int64_t l) const { return p + offsets_[l] + w_size(l); }
  int64_t w_size(int64_t l) const { return spec_.sizes[l] * spec_.sizes[l + 1]; }
  Act act(int64_t l) const { return l + 1 == layers() ? spec_.output : spec_.hidden; }

  MlpSpec spec_;
  std::vector<int64_t> offsets_;  // layer l's W at offsets_[l], its b after it; offsets_.back() = total
};

// AdamW over one flat parameter vector (kernels::adamw_step: torch.optim.AdamW's update), with its moments and
// step count: what a checkpoint saves to resume exactly.
struct AdamW {
  explicit AdamW(int64_t n, kernels::AdamWConfig c = {}) : cfg(c), m(n, 0.f), v(n, 0.f) {}
  // Clips g to max_grad_norm (> 0; torch's clip_grad_norm_), then one step. Returns the norm before clipping.
  double update(float* p, float* g, float lr, double max_grad_norm = 0);

  kernels::AdamWConfig cfg;
  std::vector<float> m, v;
  int64_t step = 0;
};

}  // namespace temper::nn
