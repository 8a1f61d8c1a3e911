// A Gaussian policy with a state-independent log-std (CleanRL's continuous PPO agent): the mean is an MLP of the
// input row, or, for the transferred controller, a low-level MLP of [observation, subgoal] where the subgoal is
// the temporal adaptor's output over the message part of the row, plus, when `residual` >= 0, the subgoal_dim
// message values from that index (the newest message's guidance: the adaptor then learns a correction to it and
// starts near the identity, its last layer being small). Parameters in one flat vector:
// [adaptor | net | log_std], so one AdamW trains all of them. Init: torch.nn.Linear's distribution, the mean's
// last layer scaled by 0.01 (CleanRL's small-output init, there orthogonal with gain 0.01), log_std constant.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "temper/nn/mlp.h"

namespace temper::control {

struct PolicySpec {
  int64_t obs_dim = 0;  // the row's first part: straight into the net
  int64_t msg_dim = 0;  // the row's second part: through the adaptor (0: no adaptor)
  std::vector<int64_t> hidden = {64, 64};
  int64_t adaptor_hidden = 32;  // the adaptor: Linear(msg_dim, h) - tanh - Linear(h, subgoal_dim)
  int64_t subgoal_dim = 2;
  int64_t residual = -1;  // >= 0: subgoal = adaptor(msg) + msg[residual, residual + subgoal_dim)
  int64_t act_dim = 2;
  float init_log_std = -0.5f;
};

class GaussianPolicy {
 public:
  explicit GaussianPolicy(PolicySpec s);
  const PolicySpec& spec() const { return spec_; }
  int64_t in() const { return spec_.obs_dim + spec_.msg_dim; }
  int64_t act_dim() const { return spec_.act_dim; }
  int64_t param_count() const { return log_std_offset() + spec_.act_dim; }
  int64_t adaptor_params() const { return adaptor_ ? adaptor_->param_count() : 0; }
  int64_t log_std_offset() const { return adaptor_params() + net_.param_count(); }
  const nn::Mlp& net() const { return net_; }
  const nn::Mlp* adaptor() const { return adaptor_ ? &*adaptor_ : nullptr; }

  void init(float* p, uint64_t seed) const;
  struct Tape {
    nn::Mlp::Tape adaptor, net;
  };
  // mean [B, act_dim] for x [B, in()].
  void mean(const float* p, const float* x, int64_t B, float* mean, Tape* tape = nullptr) const;
  // grad[0, log_std_offset()) += d loss / d (adaptor, net) for d_mean = d loss / d mean.
  void backward(const float* p, const Tape& tape, const float* d_mean, float* grad) const;
  // The adaptor's subgoal [B, subgoal_dim] for the message part of x (the policy must have an adaptor).
  void subgoal(const float* p, const float* x, int64_t B, float* g) const;

 private:
  void add_residual(const float* x, int64_t B, float* g) const;
  PolicySpec spec_;
  std::optional<nn::Mlp> adaptor_;
  nn::Mlp net_;
};

}  // namespace temper::control
