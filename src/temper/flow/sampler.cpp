#include "temper/flow/sampler.h"

#include <cmath>
#include <numbers>

#include "temper/core/error.h"
#include "temper/core/rng.h"

namespace temper::flow {

SdeStep sde_step(const SdeConfig& c, int64_t k) {
  TEMPER_CHECK(c.steps >= 1 && k >= 0 && k < c.steps) << "sde step " << k << " of " << c.steps;
  const double n = static_cast<double>(c.steps);
  SdeStep s;
  s.t = 1 - static_cast<double>(k) / n, s.t_next = 1 - static_cast<double>(k + 1) / n;
  const double dt = s.t_next - s.t;
  const double ts = k == 0 ? (c.steps > 1 ? 1 - 1 / n : 0.5) : s.t;  // sig at t = 1 is infinite: use t_1
  const double sig = c.noise * std::sqrt(ts / (1 - ts));
  s.cx = 1 + sig * sig * dt / (2 * s.t);
  s.cv = (1 + sig * sig * (1 - s.t) / (2 * s.t)) * dt;
  s.s = sig * std::sqrt(-dt);
  return s;
}

void guided_velocity(VelocityModel& m, const float* x, double t, const int32_t* y, int64_t B, double w, float* v) {
  const int64_t d = m.dim();
  if (w == 1.0) {
    std::vector<float> tt(static_cast<size_t>(B), static_cast<float>(t));
    m.forward(x, tt.data(), y, B, v, false);
    return;
  }
  // One forward over [x; x] with labels [y; null].
  std::vector<float> xx(static_cast<size_t>(2 * B * d)), tt(static_cast<size_t>(2 * B), static_cast<float>(t)),
      vv(static_cast<size_t>(2 * B * d));
  std::vector<int32_t> yy(static_cast<size_t>(2 * B), static_cast<int32_t>(m.classes()));
  std::copy(x, x + B * d, xx.begin());
  std::copy(x, x + B * d, xx.begin() + B * d);
  std::copy(y, y + B, yy.begin());
  m.forward(xx.data(), tt.data(), yy.data(), 2 * B, vv.data(), false);
  for (int64_t i = 0; i < B * d; ++i) {
    const double vc = vv[static_cast<size_t>(i)], vu = vv[static_cast<size_t>(B * d + i)];
    v[i] = static_cast<float>(vu + w * (vc - vu));
  }
}

std::vector<float> initial_noise(int64_t B, int64_t dim, uint64_t seed) {
  std::vector<float> z(static_cast<size_t>(B * dim));
  for (int64_t i = 0; i < B; ++i) {
    Rng rng(seed, static_cast<uint64_t>(i));
    for (int64_t j = 0; j < dim; ++j) z[static_cast<size_t>(i * dim + j)] = rng.normal();
  }
  return z;
}

std::vector<float> sample_ode(VelocityModel& m, const float* noise, const int32_t* y, int64_t B, const OdeConfig& c) {
  TEMPER_CHECK(c.steps >= 1) << "sampler.steps: expected >= 1, got " << c.steps;
  const int64_t d = m.dim();
  std::vector<float> x(noise, noise + B * d), v(static_cast<size_t>(B * d));
  for (int64_t k = 0; k < c.steps; ++k) {
    const double t = 1 - static_cast<double>(k) / static_cast<double>(c.steps);
    const double dt = -1 / static_cast<double>(c.steps);
    guided_velocity(m, x.data(), t, y, B, c.cfg, v.data());
    for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(x[i] + dt * v[i]);
  }
  return x;
}

double gaussian_log_prob(const float* x, const float* mean, int64_t dim, double s) {
  double q = 0;
  for (int64_t j = 0; j < dim; ++j) {
    const double z = (static_cast<double>(x[j]) - mean[j]) / s;
    q += z * z;
  }
  return -0.5 * q - static_cast<double>(dim) * (std::log(s) + 0.5 * std::log(2 * std::numbers::pi));
}

SdeTrajectory sample_sde_rows(VelocityModel& m, const int32_t* y, const uint64_t* key, const uint64_t* stream,
                              int64_t B, const SdeConfig& c) {
  TEMPER_CHECK(c.steps >= 1 && c.noise > 0)
      << "sde sampler: expected steps >= 1 and noise > 0, got " << c.steps << " and " << c.noise;
  const int64_t d = m.dim();
  SdeTrajectory tr;
  tr.B = B, tr.dim = d, tr.steps = c.steps;
  tr.x.resize(static_cast<size_t>((c.steps + 1) * B * d));
  tr.y.assign(y, y + B);
  tr.logp.resize(static_cast<size_t>(c.steps * B));
  std::vector<Rng> rng;
  rng.reserve(static_cast<size_t>(B));
  for (int64_t i = 0; i < B; ++i) rng.emplace_back(key[i], stream[i]);
  for (int64_t i = 0; i < B * d; ++i) tr.x[static_cast<size_t>(i)] = rng[static_cast<size_t>(i / d)].normal();
  std::vector<float> v(static_cast<size_t>(B * d)), mean(static_cast<size_t>(B * d));
  for (int64_t k = 0; k < c.steps; ++k) {
    const SdeStep st = sde_step(c, k);
    const float* x = tr.at(k);
    float* next = tr.x.data() + (k + 1) * B * d;
    guided_velocity(m, x, st.t, y, B, c.cfg, v.data());
    for (int64_t i = 0; i < B * d; ++i) {
      mean[static_cast<size_t>(i)] = static_cast<float>(st.cx * x[i] + st.cv * v[static_cast<size_t>(i)]);
      next[i] = static_cast<float>(mean[static_cast<size_t>(i)] + st.s * rng[static_cast<size_t>(i / d)].normal());
    }
    for (int64_t i = 0; i < B; ++i)
      tr.logp[static_cast<size_t>(k * B + i)] =
          static_cast<float>(gaussian_log_prob(next + i * d, mean.data() + i * d, d, st.s));
  }
  return tr;
}

SdeTrajectory sample_sde(VelocityModel& m, const int32_t* y, int64_t B, const SdeConfig& c, uint64_t seed) {
  std::vector<uint64_t> key(static_cast<size_t>(B), seed), stream(static_cast<size_t>(B));
  for (int64_t i = 0; i < B; ++i) stream[static_cast<size_t>(i)] = static_cast<uint64_t>(i);
  return sample_sde_rows(m, y, key.data(), stream.data(), B, c);
}

}  // namespace temper::flow
