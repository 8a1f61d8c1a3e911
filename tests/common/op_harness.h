// The op harness: random inputs, every ISA the machine has, finite differences on the reference.
// Each op test checks (1) fast forward vs the fp64 reference, (2) the reference backward vs central
// finite differences of the reference forward, (3) fast backward vs the reference backward.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <vector>

#include "temper/core/cpu_features.h"
#include "temper/core/rng.h"

namespace temper::test {

inline std::vector<float> random_vec(int64_t n, uint64_t seed, float scale = 1.0f) {
  std::vector<float> v(static_cast<size_t>(n));
  Rng r(seed, 7);
  for (auto& x : v) x = scale * r.normal();
  return v;
}

inline std::vector<double> to_f64(const std::vector<float>& v) { return std::vector<double>(v.begin(), v.end()); }

// Runs fn once per ISA this CPU supports, with that ISA active; restores the previous one.
inline void for_each_isa(const std::function<void(Isa)>& fn) {
  Isa saved = cpu_isa();
  for (Isa isa : cpu_supported_isas()) {
    SCOPED_TRACE(std::string("isa=") + std::string(isa_name(isa)));
    cpu_set_isa(isa);
    fn(isa);
  }
  cpu_set_isa(saved);
}

// Central differences of scalar loss(x) at `count` evenly spread indices of x, compared with grad.
inline ::testing::AssertionResult fd_check(std::vector<double>& x, const std::vector<double>& grad,
                                           const std::function<double()>& loss, int count = 24, double eps = 1e-5,
                                           double tol = 1e-6) {
  int64_t n = static_cast<int64_t>(x.size());
  double gmax = 0;
  for (double g : grad) gmax = std::fmax(gmax, std::fabs(g));
  for (int c = 0; c < count && c < n; ++c) {
    int64_t i = (n <= count) ? c : (c * 7919) % n;
    double saved = x[static_cast<size_t>(i)];
    x[static_cast<size_t>(i)] = saved + eps;
    double lp = loss();
    x[static_cast<size_t>(i)] = saved - eps;
    double lm = loss();
    x[static_cast<size_t>(i)] = saved;
    double fd = (lp - lm) / (2 * eps);
    double err = std::fabs(fd - grad[static_cast<size_t>(i)]) / (std::fabs(fd) + gmax * 1e-2 + 1e-12);
    if (err > tol)
      return ::testing::AssertionFailure() << "finite difference " << fd << " vs analytic " << grad[static_cast<size_t>(i)]
                                           << " at index " << i << " (rel err " << err << ")";
  }
  return ::testing::AssertionSuccess();
}

}  // namespace temper::test
