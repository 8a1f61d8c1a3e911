// The one tolerance table of CONVENTIONS.md, and a comparison that reports the worst element.
// Error of element i = max(0, |got - want| - atol) / (|want| + rms(want)): relative, with the tensor's
// rms as a floor so near-zero outputs of a reduction are judged against the tensor's scale. atol
// (default 0) covers outputs that cancel to ~0 from O(1) terms (e.g. RMSNorm with C = 1).
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

namespace temper::test {

enum class Kind { elementwise, reduction, bf16 };

// fp32 vs fp64: elementwise 1e-6 (we allow 4 ulp-ish: 2e-6 for exp-based ops via `slack`),
// reductions 1e-5 * sqrt(K / 64), bf16 inputs 1.6e-2 * max(1, sqrt(K / 64) / 4).
inline double tolerance(Kind kind, int64_t K = 1, double slack = 1.0) {
  double k = std::sqrt(static_cast<double>(K < 64 ? 64 : K) / 64.0);
  switch (kind) {
    case Kind::elementwise: return 1e-6 * slack;
    case Kind::reduction: return 1e-5 * k * slack;
    case Kind::bf16: return 1.6e-2 * (k / 4 > 1 ? k / 4 : 1) * slack;
  }
  return 0;
}

template <class A, class B>
::testing::AssertionResult all_close(const A* got, const B* want, int64_t n, double tol, double atol = 0) {
  double ss = 0;
  for (int64_t i = 0; i < n; ++i) ss += static_cast<double>(want[i]) * static_cast<double>(want[i]);
  double rms = n ? std::sqrt(ss / static_cast<double>(n)) : 0.0;
  double worst = -1, max_abs = 0;
  int64_t wi = -1;
  for (int64_t i = 0; i < n; ++i) {
    double g = static_cast<double>(got[i]), w = static_cast<double>(want[i]);
    if (!std::isfinite(g)) return ::testing::AssertionFailure() << "non-finite value " << g << " at index " << i;
    double abs = std::fabs(g - w), rel = std::fmax(0.0, abs - atol) / (std::fabs(w) + rms + 1e-300);
    if (abs > max_abs) max_abs = abs;
    if (rel > worst) {
      worst = rel;
      wi = i;
    }
  }
  if (worst <= tol) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "worst error " << worst << " > tol " << tol << " at index " << wi << " (got "
                                       << static_cast<double>(got[wi]) << ", want " << static_cast<double>(want[wi])
                                       << "), max abs error " << max_abs << ", rms(want) " << rms << ", n " << n;
}

template <class A, class B>
::testing::AssertionResult all_close(const std::vector<A>& got, const std::vector<B>& want, double tol,
                                     double atol = 0) {
  if (got.size() != want.size())
    return ::testing::AssertionFailure() << "size " << got.size() << " != " << want.size();
  return all_close(got.data(), want.data(), static_cast<int64_t>(got.size()), tol, atol);
}

}  // namespace temper::test
