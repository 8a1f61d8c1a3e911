// A real-vs-generated discriminator for text (discriminator-guided RL, spec methods-other section 4,
// the LLM form): features = the mean of a frozen model's final hidden states over a reply's tokens;
// a logistic-regression head on them, trained with the logistic loss on real (label 1) and generated
// (label 0) replies, classes weighted to balance. With balanced classes the optimal logit is
// log p_real(x) / p_gen(x), the reward that makes KL-regularised RL at weight 1 target the real
// distribution; the reward is the logit clipped to [-clip, clip].
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "temper/core/settings.h"

namespace temper::rl {

struct DiscriminatorConfig {
  int64_t epochs = 1000;  // full-batch gradient steps
  double lr = 0.5;
  double l2 = 1e-3;
  double clip = 10;
  void validate() const;
  void visit(KeyVisitor& v);
};

class Discriminator {
 public:
  explicit Discriminator(DiscriminatorConfig cfg = {});
  // Fit on real and generated feature rows ([n, dim] each). Features are standardised with the
  // pooled mean and spread; each class carries half the loss whatever its count.
  void fit(const std::vector<std::vector<float>>& real, const std::vector<std::vector<float>>& gen);
  double logit(const std::vector<float>& x) const;   // unclipped
  double reward(const std::vector<float>& x) const;  // clipped
  double accuracy(const std::vector<std::vector<float>>& real, const std::vector<std::vector<float>>& gen) const;
  bool fitted() const { return !w_.empty(); }
  const std::vector<double>& weights() const { return w_; }  // on standardised features
  double bias() const { return b_; }
  std::string save() const;  // the fitted head as text (checkpoints)
  void load(const std::string& text);

 private:
  DiscriminatorConfig cfg_;
  std::vector<double> mean_, inv_sd_, w_;
  double b_ = 0;
};

}  // namespace temper::rl
