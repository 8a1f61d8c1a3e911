#include "temper/spotlight/seeded_sampler.h"

#include "temper/core/error.h"
#include "temper/core/rng.h"

namespace temper::spotlight {

uint64_t seed_key(uint64_t run_seed, int32_t label) {
  return mix_seed(mix_seed(run_seed, 0x5eed), static_cast<uint64_t>(label));
}

flow::SdeTrajectory sample_sde_streams(flow::VelocityModel& m, const int32_t* y, const uint64_t* key,
                                       const uint64_t* stream, int64_t B, const flow::SdeConfig& c) {
  TEMPER_CHECK(c.steps >= 1 && c.noise > 0)
      << "sde sampler: expected steps >= 1 and noise > 0, got " << c.steps << " and " << c.noise;
  const int64_t d = m.dim();
  flow::SdeTrajectory tr;
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
    const flow::SdeStep st = flow::sde_step(c, k);
    const float* x = tr.at(k);
    float* next = tr.x.data() + (k + 1) * B * d;
    flow::guided_velocity(m, x, st.t, y, B, c.cfg, v.data());
    for (int64_t i = 0; i < B * d; ++i) {
      mean[static_cast<size_t>(i)] = static_cast<float>(st.cx * x[i] + st.cv * v[static_cast<size_t>(i)]);
      next[i] = static_cast<float>(mean[static_cast<size_t>(i)] + st.s * rng[static_cast<size_t>(i / d)].normal());
    }
    for (int64_t i = 0; i < B; ++i)
      tr.logp[static_cast<size_t>(k * B + i)] =
          static_cast<float>(flow::gaussian_log_prob(next + i * d, mean.data() + i * d, d, st.s));
  }
  return tr;
}

std::vector<float> sample_ode_streams(flow::VelocityModel& m, const int32_t* y, const uint64_t* key,
                                      const uint64_t* stream, int64_t B, const flow::OdeConfig& c) {
  const int64_t d = m.dim();
  std::vector<float> z(static_cast<size_t>(B * d));
  for (int64_t i = 0; i < B; ++i) {
    Rng rng(key[i], stream[i]);
    for (int64_t j = 0; j < d; ++j) z[static_cast<size_t>(i * d + j)] = rng.normal();
  }
  return flow::sample_ode(m, z.data(), y, B, c);
}

std::vector<float> sample_seeds(flow::VelocityModel& m, uint64_t run_seed, int32_t label,
                                const std::vector<uint64_t>& seeds, const flow::SdeConfig& sde, bool ode) {
  const auto B = static_cast<int64_t>(seeds.size());
  const std::vector<int32_t> y(seeds.size(), label);
  const std::vector<uint64_t> key(seeds.size(), seed_key(run_seed, label));
  if (ode) {
    flow::OdeConfig oc;
    oc.steps = sde.steps, oc.cfg = sde.cfg;
    return sample_ode_streams(m, y.data(), key.data(), seeds.data(), B, oc);
  }
  const flow::SdeTrajectory tr = sample_sde_streams(m, y.data(), key.data(), seeds.data(), B, sde);
  return std::vector<float>(tr.sample(), tr.sample() + B * m.dim());
}

}  // namespace temper::spotlight
