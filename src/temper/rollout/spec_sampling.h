// Lossless speculative sampling (Leviathan et al. 2023, Chen et al. 2023): a drafted token x ~ q is
// kept with probability min(1, p(x) / q(x)); at the first rejection the token is drawn from
// normalize(max(0, p - q)); after gamma acceptances a bonus token is drawn from p. Every emitted
// token is then distributed exactly as p. p and q are the dense, fully processed distributions
// (Sampler::distribution: same penalties, temperature and truncation for both).
#pragma once

#include <cstdint>

#include "temper/core/rng.h"

namespace temper::rollout {

// A draw from a dense distribution (vocabulary order, one uniform).
int32_t sample_dense(const float* p, int64_t V, Rng& rng);
// Keep drafted token x? One uniform; always true when p(x) >= q(x).
bool spec_accept(float p_x, float q_x, Rng& rng);
// The replacement after a rejection: a draw from normalize(max(0, p - q)) (one uniform). When that
// mass underflows (p == q to rounding), a draw from p.
int32_t spec_residual(const float* p, const float* q, int64_t V, Rng& rng);

}  // namespace temper::rollout
