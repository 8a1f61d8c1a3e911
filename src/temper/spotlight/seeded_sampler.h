// The flow samplers with one noise stream per row named by the caller, so a candidate seed means the same
// random path wherever it is generated (an explorer's chunk of 8, the trainer's group of G): row i draws its
// x_1 and every SDE step's noise from Philox stream (seed_key(run_seed, label), seed id), in the order of
// flow::sample_sde_rows (SDE paths) and flow::sample_ode (from the rows' x_1).
// Leaves out the sampler's mathematics (flow/sampler.h: sde_step, guided_velocity).
#pragma once

#include <cstdint>
#include <vector>

#include "temper/flow/sampler.h"

namespace temper::spotlight {

// The Philox key of class `label`'s seeds in a run.
uint64_t seed_key(uint64_t run_seed, int32_t label);

// Euler ODE samples from the same rows' x_1.
std::vector<float> sample_ode_streams(flow::VelocityModel& m, const int32_t* y, const uint64_t* key,
                                      const uint64_t* stream, int64_t B, const flow::OdeConfig& c);

// Samples of `seeds` of class `label` (keys from seed_key): x [n, dim]; SDE (ode = false) or ODE.
std::vector<float> sample_seeds(flow::VelocityModel& m, uint64_t run_seed, int32_t label,
                                const std::vector<uint64_t>& seeds, const flow::SdeConfig& sde, bool ode);

}  // namespace temper::spotlight
