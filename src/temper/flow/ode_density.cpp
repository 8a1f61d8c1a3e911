#include "temper/flow/ode_density.h"

#include <cmath>
#include <numbers>

#include "temper/core/error.h"

namespace temper::flow {

namespace {
// log |det a| of a [d, d] (row-major) by Gaussian elimination with partial pivoting.
double log_abs_det(std::vector<double> a, int64_t d) {
  double s = 0;
  for (int64_t c = 0; c < d; ++c) {
    int64_t p = c;
    for (int64_t r = c + 1; r < d; ++r)
      if (std::abs(a[static_cast<size_t>(r * d + c)]) > std::abs(a[static_cast<size_t>(p * d + c)])) p = r;
    if (p != c)
      for (int64_t j = 0; j < d; ++j) std::swap(a[static_cast<size_t>(c * d + j)], a[static_cast<size_t>(p * d + j)]);
    const double piv = a[static_cast<size_t>(c * d + c)];
    if (piv == 0) return -INFINITY;
    s += std::log(std::abs(piv));
    for (int64_t r = c + 1; r < d; ++r) {
      const double f = a[static_cast<size_t>(r * d + c)] / piv;
      for (int64_t j = c; j < d; ++j) a[static_cast<size_t>(r * d + j)] -= f * a[static_cast<size_t>(c * d + j)];
    }
  }
  return s;
}
}  // namespace

OdeSamples sample_ode_with_density(VelocityModel& m, const float* noise, const int32_t* y, int64_t B,
                                   const OdeConfig& c, double h) {
  const int64_t d = m.dim();
  TEMPER_CHECK(d <= 8) << "ode density: dim " << d << " needs " << 2 * d
                       << " extra forwards per step; it is for dim <= 8";
  TEMPER_CHECK(c.steps >= 1) << "sampler.steps: expected >= 1, got " << c.steps;
  OdeSamples out;
  out.x.assign(noise, noise + B * d);
  out.logq.assign(static_cast<size_t>(B), 0.0);
  for (int64_t i = 0; i < B; ++i) {
    double q = 0;
    for (int64_t j = 0; j < d; ++j) q += static_cast<double>(noise[i * d + j]) * noise[i * d + j];
    out.logq[static_cast<size_t>(i)] = -0.5 * q - 0.5 * static_cast<double>(d) * std::log(2 * std::numbers::pi);
  }
  const double dt = -1 / static_cast<double>(c.steps);
  std::vector<float> v(static_cast<size_t>(B * d)), xp(v.size()), vp(v.size()), vm(v.size());
  std::vector<double> jac(static_cast<size_t>(B * d * d));  // per row: I + dt J
  for (int64_t k = 0; k < c.steps; ++k) {
    const double t = 1 + static_cast<double>(k) * dt;
    for (int64_t col = 0; col < d; ++col) {
      xp = out.x;
      for (int64_t i = 0; i < B; ++i) xp[static_cast<size_t>(i * d + col)] += static_cast<float>(h);
      guided_velocity(m, xp.data(), t, y, B, c.cfg, vp.data());
      xp = out.x;
      for (int64_t i = 0; i < B; ++i) xp[static_cast<size_t>(i * d + col)] -= static_cast<float>(h);
      guided_velocity(m, xp.data(), t, y, B, c.cfg, vm.data());
      for (int64_t i = 0; i < B; ++i) {
        // the step actually taken in x: the float offsets, not h
        const double span = static_cast<double>(out.x[static_cast<size_t>(i * d + col)] + static_cast<float>(h)) -
                            static_cast<double>(out.x[static_cast<size_t>(i * d + col)] - static_cast<float>(h));
        for (int64_t r = 0; r < d; ++r) {
          const double dv =
              (static_cast<double>(vp[static_cast<size_t>(i * d + r)]) - vm[static_cast<size_t>(i * d + r)]) / span;
          jac[static_cast<size_t>(i * d * d + r * d + col)] = (r == col ? 1.0 : 0.0) + dt * dv;
        }
      }
    }
    guided_velocity(m, out.x.data(), t, y, B, c.cfg, v.data());
    for (int64_t i = 0; i < B; ++i) {
      out.logq[static_cast<size_t>(i)] -=
          log_abs_det(std::vector<double>(jac.begin() + i * d * d, jac.begin() + (i + 1) * d * d), d);
      for (int64_t j = 0; j < d; ++j)
        out.x[static_cast<size_t>(i * d + j)] =
            static_cast<float>(out.x[static_cast<size_t>(i * d + j)] + dt * v[static_cast<size_t>(i * d + j)]);
    }
  }
  return out;
}

}  // namespace temper::flow
