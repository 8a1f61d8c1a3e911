#include "temper/flow/density_grid.h"

#include <cmath>
#include <vector>

#include "temper/core/error.h"

namespace temper::flow {

double grid_half_width(const Toy2dConfig& c) {
  return c.radius + 4 * c.std;
}

GridDistance density_distance(const Toy2d& truth, const float* x, int64_t n, int32_t y, int64_t cells) {
  TEMPER_CHECK(n > 0 && cells > 1) << "density distance: needs samples (got " << n << ") and cells > 1 (got " << cells
                                   << ")";
  const double half = grid_half_width(truth.config()), h = 2 * half / static_cast<double>(cells);
  const auto nc = static_cast<size_t>(cells * cells);
  std::vector<double> p(nc), q(nc, 0.0);
  double ptotal = 0;
  for (int64_t i = 0; i < cells; ++i)
    for (int64_t j = 0; j < cells; ++j) {
      const double cx = -half + (static_cast<double>(i) + 0.5) * h, cy = -half + (static_cast<double>(j) + 0.5) * h;
      p[static_cast<size_t>(i * cells + j)] = std::exp(truth.log_density(cx, cy, y));
      ptotal += p[static_cast<size_t>(i * cells + j)];
    }
  for (auto& v : p) v /= ptotal;
  GridDistance g;
  int64_t inside = 0;
  for (int64_t k = 0; k < n; ++k) {
    const double a = x[2 * k], b = x[2 * k + 1];
    const auto i = static_cast<int64_t>(std::floor((a + half) / h)),
               j = static_cast<int64_t>(std::floor((b + half) / h));
    if (i < 0 || j < 0 || i >= cells || j >= cells) continue;  // outside the grid: counts against q's total only
    q[static_cast<size_t>(i * cells + j)] += 1, ++inside;
  }
  const double smooth = 0.5, denom = static_cast<double>(n) + smooth * static_cast<double>(nc);
  for (size_t c = 0; c < nc; ++c) {
    g.tv += std::abs(p[c] - q[c] / static_cast<double>(n));
    const double qs = (q[c] + smooth) / denom;
    if (p[c] > 0) g.kl += p[c] * std::log(p[c] / qs);
  }
  g.tv = 0.5 * (g.tv + static_cast<double>(n - inside) / static_cast<double>(n));
  return g;
}

}  // namespace temper::flow
