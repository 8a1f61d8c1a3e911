#include "temper/flow/features.h"

#include "temper/core/error.h"

namespace temper::flow {

std::vector<float> embed_all(const Features& f, const std::vector<float>& x) {
  const int64_t d = f.in_dim();
  TEMPER_CHECK(d > 0 && static_cast<int64_t>(x.size()) % d == 0)
      << "features '" << f.name() << "': " << x.size() << " values are not whole samples of " << d;
  const int64_t n = static_cast<int64_t>(x.size()) / d;
  std::vector<float> out(static_cast<size_t>(n * f.dim()));
  if (n > 0) f.embed(x.data(), n, out.data());
  return out;
}

}  // namespace temper::flow
