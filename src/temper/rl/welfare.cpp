#include "temper/rl/welfare.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "temper/core/error.h"

namespace temper::rl {

std::vector<double> ggf_weights(int64_t D, const std::string& kind) {
  TEMPER_CHECK(D >= 1) << "GGF weights: need at least one objective, got " << D;
  std::vector<double> w(static_cast<size_t>(D));
  for (int64_t i = 0; i < D; ++i) {
    if (kind == "linear") w[static_cast<size_t>(i)] = static_cast<double>(D - i);
    else if (kind == "geometric") w[static_cast<size_t>(i)] = std::ldexp(1.0, -static_cast<int>(i));
    else TEMPER_FAIL() << "GGF weights: expected \"linear\" or \"geometric\", got '" << kind << "'";
  }
  const double s = std::accumulate(w.begin(), w.end(), 0.0);
  for (double& x : w) x /= s;
  return w;
}

void check_ggf_weights(const std::vector<double>& w, const std::string& what) {
  TEMPER_CHECK(!w.empty()) << what << ": expected GGF weights, got none";
  for (size_t i = 0; i < w.size(); ++i) {
    TEMPER_CHECK(std::isfinite(w[i]) && w[i] > 0) << what << ": GGF weights must be positive, got " << w[i] << " at " << i;
    TEMPER_CHECK(i == 0 || w[i] < w[i - 1]) << what << ": GGF weights must be strictly decreasing (the worst-off objective "
                                                       "first), got " << w[i - 1] << " then " << w[i];
  }
}

namespace {

std::vector<size_t> ascending(const std::vector<double>& v) {
  std::vector<size_t> order(v.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return v[a] < v[b]; });
  return order;
}

}  // namespace

double ggf(const std::vector<double>& w, const std::vector<double>& v) {
  TEMPER_CHECK(w.size() == v.size()) << "GGF: " << w.size() << " weights for " << v.size() << " objectives";
  const std::vector<size_t> order = ascending(v);
  double s = 0;
  for (size_t i = 0; i < v.size(); ++i) s += w[i] * v[order[i]];
  return s;
}

std::vector<double> ggf_supergradient(const std::vector<double>& w, const std::vector<double>& v) {
  TEMPER_CHECK(w.size() == v.size()) << "GGF: " << w.size() << " weights for " << v.size() << " objectives";
  const std::vector<size_t> order = ascending(v);
  std::vector<double> lambda(v.size());
  for (size_t i = 0; i < v.size(); ++i) lambda[order[i]] = w[i];
  return lambda;
}

}  // namespace temper::rl
