// Generalized Gini welfare (fair multi-objective RL, spec methods-other section 6): for a vector v of
// D objectives and weights w_1 > w_2 > ... > w_D > 0, GGF_w(v) = sum_i w_i v_(i) with v sorted
// ascending, so the worst-off objective gets the largest weight. The fair RL method scalarises each
// rollout's reward vector with the supergradient at its group's mean reward vector.
#pragma once

#include <string>
#include <vector>

namespace temper::rl {

// Normalised (sum 1) strictly decreasing weights for D objectives: "linear" w_i ∝ D - i + 1,
// "geometric" w_i ∝ 2^-(i-1).
std::vector<double> ggf_weights(int64_t D, const std::string& kind);
// Throws unless w is non-empty, positive and strictly decreasing (what = the recipe key, for the message).
void check_ggf_weights(const std::vector<double>& w, const std::string& what);
// Concave, piecewise linear, symmetric; uniform weights give the mean, (1, 0, ..., 0) the minimum.
double ggf(const std::vector<double>& w, const std::vector<double>& v);
// Because GGF_w(v) = min over permutations of sum_i w_sigma(i) v_i, lambda = w placed by the ascending
// ranks of v is a supergradient at v: GGF_w(u) <= lambda . u for every u, with equality at u = v.
// lambda with lambda[j] = w[rank of v[j] ascending] (ties: the lower index ranks first).
std::vector<double> ggf_supergradient(const std::vector<double>& w, const std::vector<double>& v);

}  // namespace temper::rl
