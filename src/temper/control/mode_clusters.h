// The mixture prior over task modes, as the spec's simpler option: DP-means (Kulis & Jordan 2012, "Revisiting
// k-means: new algorithms via Bayesian nonparametrics"), the small-variance limit of a Dirichlet-process
// mixture: a point farther than lambda from every centre opens a new mode (up to max_modes), so the number of
// modes is not fixed in advance. fit(): one online pass in order (each point joins its nearest centre, which
// moves to the running mean, or opens a mode), then Lloyd refinement passes with the same rule. lambda is
// new_mode_distance times the points' RMS distance from their mean (latents have no fixed scale). assign():
// the nearest centre (a frozen model; no new modes). fit_stick_breaking() is the spec's variational option.
#pragma once

#include <cstdint>
#include <vector>

namespace temper::control {

class ModeClusters {
 public:
  ModeClusters(int64_t dim = 1, int64_t max_modes = 8) : dim_(dim), max_modes_(max_modes) {}
  int64_t dim() const { return dim_; }
  int64_t max_modes() const { return max_modes_; }
  int64_t modes() const { return static_cast<int64_t>(centres_.size()) / dim_; }
  // Fits to x [n, dim]; returns each point's mode.
  std::vector<int32_t> fit(const float* x, int64_t n, float new_mode_distance, int refine_passes = 10);
  // The spec's variational option (stick_breaking.cpp): a Dirichlet-process mixture truncated at max_modes
  // sticks (Blei & Jordan 2006, "Variational inference for Dirichlet process mixtures"), isotropic Gaussian
  // components of known per-dimension sd sigma x the points' RMS spread per dimension, mean prior N(data mean,
  // that spread^2 I), concentration alpha; coordinate ascent on q(v) q(mu) q(z) from farthest-first centres,
  // the sticks kept in decreasing size. The modes are the components holding > 1 point's worth of
  // responsibility (none such: the largest stick alone); assign() is then the nearest of their centres. Returns
  // each point's most likely mode.
  std::vector<int32_t> fit_stick_breaking(const float* x, int64_t n, float alpha, float sigma, int iterations = 200);
  int32_t assign(const float* x) const;
  // Checkpoint form: [max_modes * dim] centres then the mode count as the last value.
  std::vector<float> to_vector() const;
  void from_vector(const std::vector<float>& v);
  const std::vector<float>& centres() const { return centres_; }

 private:
  int64_t dim_, max_modes_;
  std::vector<float> centres_;  // [modes, dim]
};

// Adjusted Rand index (Hubert & Arabie 1985) between two labelings of the same points: 1 identical partitions,
// about 0 for independent ones.
double adjusted_rand_index(const std::vector<int32_t>& a, const std::vector<int32_t>& b);

}  // namespace temper::control
