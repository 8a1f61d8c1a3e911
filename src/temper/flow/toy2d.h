// 2-D distributions with known densities, the spec's miniature data (methods-other section 4): a mixture of
// Gaussians on a circle, concentric rings (radius ~ N(R_k, s^2) truncated at 0, angle uniform: density
// N(|x|; R_k, s) / (Phi(R_k / s) 2 pi |x|)), and spiral arms (each arm a chain of 32 Gaussians along
// r = R u, angle = 3 pi u + 2 pi k / arms). Components carry labels (component or arm index mod classes).
// Sampling is deterministic: sample i is a pure function of (seed, i).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "temper/core/settings.h"

namespace temper::flow {

struct Toy2dConfig {
  std::string kind = "gaussians";  // gaussians | rings | spirals: the recipe's data.kind (visit() leaves it out)
  int64_t modes = 8;               // Gaussians on the circle, rings, or spiral arms
  int64_t classes = 1;             // labels: mode index mod classes (1: unconditional)
  double radius = 3.0;             // circle radius, outer ring radius, or spiral length
  double std = 0.25;               // each component's spread
  std::string weights;             // the modes' weights, comma-separated ("" : equal)
  void validate() const;
  void visit(KeyVisitor& v);
};

class Toy2d {
 public:
  explicit Toy2d(Toy2dConfig c);
  const Toy2dConfig& config() const { return cfg_; }
  int64_t classes() const { return cfg_.classes; }
  double class_prob(int32_t y) const;
  // x [n, 2] and labels y [n] drawn from the joint; sample i from (seed, i).
  void sample(int64_t n, uint64_t seed, std::vector<float>& x, std::vector<int32_t>& y) const;
  std::vector<int32_t> labels(int64_t n, uint64_t seed) const;  // sample()'s y alone
  // x [n, 2] drawn from p(x | y) (y < 0: the marginal).
  std::vector<float> sample_class(int64_t n, int32_t y, uint64_t seed) const;
  // log p(x) (y < 0) or log p(x | y).
  double log_density(double x0, double x1, int32_t y = -1) const;

 private:
  struct Component {
    bool ring = false;
    double cx = 0, cy = 0;  // a Gaussian's centre
    double r = 0;           // a ring's radius
    double std = 0, weight = 0;
    int32_t label = 0;
    // log_density's constants, set once by the constructor: the log normaliser (a Gaussian's log(2 pi s^2), a
    // ring's log(s sqrt(2 pi) Phi(R / s))), log(weight) and log(weight / the class's weight).
    double log_norm = 0, log_weight = 0, log_weight_in_class = 0;
  };
  int64_t pick(double u, int32_t y) const;  // a component of label y (any: y < 0) by weight, from u in [0, 1)
  Toy2dConfig cfg_;
  std::vector<Component> comps_;
  std::vector<double> class_weight_;
};

}  // namespace temper::flow
