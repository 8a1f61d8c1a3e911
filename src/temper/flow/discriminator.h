// The class-balanced logistic discriminator of DG-RL (spec methods-other section 4): real samples (label 1)
// against the base generator's (label 0) on frozen features (features.h), one linear head per class label
// for a class-conditional generator (real x | y against generated x | y) or one head for all. Features are
// standardised with the pooled mean and spread; the L2-penalised logistic loss, each side carrying half of it
// whatever its count ("balanced"), is minimised by Newton's method (IRLS with step halving), so at the
// optimum the logit estimates log p_data(x | y) / p_0(x | y). Unbalanced (each example weighted alike), the
// logit estimates that plus log(n_real / n_gen), and the reward adds the prior correction log(n_gen / n_real).
// Reward = the corrected logit clipped to [-clip, clip]. The text models' twin is rl/discriminator.h.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "temper/core/settings.h"

namespace temper::flow {

struct DiscConfig {
  int64_t samples = 4096;   // generated (and real) samples per class label and fit
  double l2 = 1e-3;         // penalty on the weights (not the bias), on the balanced mean loss
  int64_t iters = 30;       // Newton steps at most (stops when the loss stops improving)
  double clip = 10;         // the reward's bound
  bool balanced = true;     // each side half the loss; false: every example alike, plus the prior correction
  bool per_class = true;    // one head per class label (class-conditional generators)
  int64_t refit_every = 0;  // RL steps between refits on the current policy (0: one fit, on the base)
  void validate() const;
  void visit(KeyVisitor& v);
};

struct DiscFitStats {
  double accuracy = 0;  // balanced accuracy on the fitting set
  double loss = 0;      // the balanced logistic loss there (without the penalty)
  int64_t real = 0, gen = 0;
};

class Discriminator {
 public:
  explicit Discriminator(DiscConfig c = {});
  const DiscConfig& config() const { return cfg_; }
  // real [n, dim] with labels, gen [m, dim] with labels; heads() = classes (per_class) or 1.
  DiscFitStats fit(const std::vector<float>& real, const std::vector<int32_t>& real_y, const std::vector<float>& gen,
                   const std::vector<int32_t>& gen_y, int64_t dim, int64_t classes);
  bool fitted() const { return !w_.empty(); }
  int64_t dim() const { return dim_; }
  // The logit with the prior correction (an estimate of log p_data / p_0), unclipped; and the reward (clipped).
  double logit(const float* f, int32_t y) const;
  double reward(const float* f, int32_t y) const;
  // Rewards of rows f [n, dim] with labels y.
  std::vector<double> rewards(const std::vector<float>& f, const std::vector<int32_t>& y) const;
  // The head as named tensors and back (checkpoints).
  std::vector<std::pair<std::string, std::vector<float>>> tensors(const std::string& prefix) const;
  void load(const std::vector<std::pair<std::string, std::vector<float>>>& tensors, const std::string& prefix);

 private:
  int64_t head(int32_t y) const;
  DiscConfig cfg_;
  int64_t dim_ = 0, heads_ = 0;
  std::vector<float> mean_, inv_sd_;  // [dim]
  std::vector<float> w_;              // [heads, dim + 1]: weights then the bias (prior correction folded in)
};

}  // namespace temper::flow
