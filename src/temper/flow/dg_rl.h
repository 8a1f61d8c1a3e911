// Discriminator-guided RL for flow models (spec methods-other section 4; Beltran-Velez et al. 2026): the base
// generator p_0's samples against real data train a class-balanced logistic discriminator on frozen features
// (discriminator.h; p_0 is the sampler the method changes: the SDE's paths for grpo, the ODE's for rwfm); its clipped
// logit r (an estimate of log p_data / p_0) is the reward of KL-regularised RL from p_0, max E_pi[r] - beta KL(pi ||
// p_0), whose optimum p_0 exp(r / beta) / Z is p_data at beta = 1 (docs/METHODS.md). Methods (rl.method):
//   grpo: GRPO over groups of `group` SDE samples of one class label, per-step Gaussian KL to the base
//         (flow_grpo.h), one on-policy AdamW step per batch;
//   rwfm: reward-weighted flow matching: a pool of base ODE samples weighted by exp(r / beta) (self-normalised),
//         the flow fine-tuned on them (weighted FM loss), which fits p_0 exp(r / beta) / Z directly;
//   fm:   plain flow-matching steps on real data (the "train the base longer" baseline).
// With rl.discriminator.refit_every = K > 0 the head is refitted every K steps on real data against the policy as
// it stands (the rwfm pool redrawn from it); the KL stays to p_0. Every draw is a function of (seed, step).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "temper/core/settings.h"
#include "temper/flow/data_source.h"
#include "temper/flow/discriminator.h"
#include "temper/flow/evaluate.h"
#include "temper/flow/features.h"
#include "temper/flow/flow_grpo.h"
#include "temper/flow/sampler.h"
#include "temper/nn/mlp.h"

namespace temper::flow {

struct DgRlConfig {
  std::string method = "grpo";  // grpo | rwfm | fm
  double beta = 1.0;            // the KL weight (1: the distribution-matching point)
  int64_t steps = 200;
  double lr = 3e-4;
  double weight_decay = 0.0;
  double max_grad_norm = 1.0;
  int64_t batch = 256;     // rwfm / fm: samples per step
  int64_t pool = 8192;     // rwfm: base samples weighted per round
  double p_uncond = 0.1;   // fm: label dropout (class-conditional data only)
  int64_t ode_steps = 50;  // rwfm: the base samples' ODE steps
  int64_t seed = 1;
  SdeConfig sde;        // [rl.sde]: the policy's sampler (grpo)
  FlowGrpoConfig grpo;  // [rl.grpo]
  DiscConfig disc;      // [rl.discriminator]
  void validate() const;
  void visit(KeyVisitor& v);  // [rl]
  void visit_sections(KeyVisitor& sde_v, KeyVisitor& grpo_v, KeyVisitor& disc_v);
};

class DgRl {
 public:
  // policy starts as a copy of base (the caller's); both outlive this.
  DgRl(VelocityModel& policy, VelocityModel& base, const DataSource& data, const Features& f, DgRlConfig c);
  const DgRlConfig& config() const { return cfg_; }
  // Fits round `round`'s head on real samples against `gen`'s samples (and redraws the rwfm pool from gen).
  DiscFitStats refit(VelocityModel& gen, int64_t round);
  // One RL step (step counts from 1): refits on the policy first when due. Returns the step's metrics.
  Metrics step(int64_t step);
  Discriminator& disc() { return disc_; }
  nn::AdamW& opt() { return opt_; }
  int64_t fits() const { return fits_; }
  double compute() const { return compute_; }  // model row-evaluations so far (a backward row counts 2)
  // What a checkpoint keeps besides the policy and the optimiser: the head and the rwfm pool as tensors
  // ("disc.*", "pool.*"), and the counters.
  struct Counters {
    int64_t fits = 0;
    double compute = 0, fit_accuracy = 0;
  };
  std::vector<std::pair<std::string, std::vector<float>>> state_tensors() const;
  Counters counters() const { return {fits_, compute_, last_fit_.accuracy}; }
  using TensorLookup = std::function<const std::vector<float>&(const std::string&)>;
  void restore(const TensorLookup& tensor, const Counters& c);
  // Rewards of samples x [n, dim] with labels y.
  std::vector<double> rewards(const std::vector<float>& x, const std::vector<int32_t>& y) const;

 private:
  Metrics grpo_step(int64_t step);
  Metrics rwfm_step(int64_t step);
  Metrics fm_step(int64_t step);
  void draw_pool(VelocityModel& gen, int64_t round);
  // gen's samples for labels y: the SDE sampler's for grpo (the policy), the ODE's for rwfm (a velocity field).
  std::vector<float> generate(VelocityModel& gen, const std::vector<int32_t>& y, uint64_t seed);
  void set_pool_ess();
  std::vector<int32_t> labels(int64_t n, uint64_t seed) const;  // drawn with the data's class frequencies

  VelocityModel& policy_;
  VelocityModel& base_;
  const DataSource& data_;
  const Features& features_;
  DgRlConfig cfg_;
  Discriminator disc_;
  nn::AdamW opt_;
  std::vector<float> grad_;
  std::vector<float> pool_x_;  // rwfm: [pool, dim]
  std::vector<int32_t> pool_y_;
  std::vector<float> pool_w_;  // normalised to mean 1 (f32: what a checkpoint holds)
  double pool_ess_ = 0;
  int64_t fits_ = 0;
  double compute_ = 0;
  DiscFitStats last_fit_;
};

}  // namespace temper::flow
