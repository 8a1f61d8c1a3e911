#include "temper/rl/ngram_features.h"

#include <cmath>

#include "temper/core/error.h"
#include "temper/core/fnv1a.h"
#include "temper/tasks/user_sim.h"

namespace temper::rl {

namespace {

std::vector<double> grams(const std::string& s, int64_t dim) {
  std::vector<double> v(static_cast<size_t>(dim), 0.0);
  const std::string t = "^" + s + "$";
  for (size_t n = 1; n <= 3; ++n)
    for (size_t i = 0; i + n <= t.size(); ++i)
      v[fnv1a(std::string_view(t).substr(i, n), kFnv1aShortBasis) % static_cast<uint64_t>(dim)] += 1;
  double ss = 0;
  for (double x : v) ss += x * x;
  if (ss > 0)
    for (double& x : v) x /= std::sqrt(ss);
  return v;
}

}  // namespace

std::vector<float> ngram_features(const std::string& reply, const std::vector<std::string>& context, int64_t dim) {
  TEMPER_CHECK(dim >= 1) << "ngram features: dim must be >= 1, got " << dim;
  std::string joined;
  double words = 0;
  for (const std::string& c : context) {
    joined += (joined.empty() ? "" : " ") + c;
    words += static_cast<double>(tasks::word_count(c));
  }
  const std::vector<double> r = grams(reply, dim), h = grams(joined, dim);
  const double w = static_cast<double>(tasks::word_count(reply));
  const double m = context.empty() ? w : words / static_cast<double>(context.size());
  std::vector<float> f(static_cast<size_t>(2 * dim + 2));
  for (size_t j = 0; j < static_cast<size_t>(dim); ++j) {
    f[j] = static_cast<float>(r[j]);
    f[static_cast<size_t>(dim) + j] = static_cast<float>(30.0 * r[j] * h[j]);
  }
  f[static_cast<size_t>(2 * dim)] = static_cast<float>(std::log1p(w));
  f[static_cast<size_t>(2 * dim + 1)] = static_cast<float>(std::fabs(std::log((w + 1) / (m + 1))));
  return f;
}

}  // namespace temper::rl
