#include "temper/spotlight/seeded_sampler.h"

#include "temper/core/error.h"
#include "temper/core/rng.h"

namespace temper::spotlight {

uint64_t seed_key(uint64_t run_seed, int32_t label) {
  return mix_seed(mix_seed(run_seed, 0x5eed), static_cast<uint64_t>(label));
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
  const flow::SdeTrajectory tr = flow::sample_sde_rows(m, y.data(), key.data(), seeds.data(), B, sde);
  return std::vector<float>(tr.sample(), tr.sample() + B * m.dim());
}

}  // namespace temper::spotlight
