// Ground truth for small worlds: the exact Pareto front of discounted vector returns at (start, u0), by set-valued
// value iteration over the product (V(s,u) = ND(U_a {r + gamma v : v in V(s',u')}), terminal sets {0}, iterated
// from {0} until no set changes: exact when the machines pay nothing inside cycles, which makes the front finite),
// by enumerating every action sequence up to a length (the slow cross-check), and the optimum of one linear
// scalarisation (scalar value iteration: a point of the front's convex hull). Both fronts are over deterministic
// (possibly non-stationary) policies, the set PQL's tracking realises. Leaves out: large worlds (sets blow up).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "temper/tabular/product.h"

namespace temper::tabular {

// The front at (start, u0): [n, D] in canonical order. Throws when the sets have not settled after max_sweeps.
std::vector<double> true_front(const ProductMdp& p, double gamma, int64_t max_sweeps = 10000);

// Every action sequence of up to max_len steps from (start, u0) (stopping at a terminal joint state): the
// non-dominated discounted returns. A^max_len sequences: tiny worlds only.
std::vector<double> front_by_enumeration(const ProductMdp& p, double gamma, int64_t max_len);

// max over policies of w . return from (start, u0), by scalar value iteration to convergence (tol 1e-12).
double scalar_optimum(const ProductMdp& p, double gamma, std::span<const double> w);

// How a learned front matches the true one: true points with a learned point within tol (max-norm), and learned
// points with no true point within tol.
struct FrontMatch {
  int64_t recovered = 0, missing = 0, spurious = 0;
  double worst = 0;  // the largest distance from a true point to its nearest learned point
};
FrontMatch match_fronts(std::span<const double> learned, std::span<const double> truth, int D, double tol);

}  // namespace temper::tabular
