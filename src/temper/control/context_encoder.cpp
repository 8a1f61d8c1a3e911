#include "temper/control/context_encoder.h"

#include <algorithm>

#include "temper/control/mlp_spec.h"
#include "temper/core/error.h"
#include "temper/core/rng.h"

namespace temper::control {

ContextEncoder::ContextEncoder(EncoderSpec s)
    : spec_(std::move(s)),
      enc_(mlp_spec(spec_.context_dim, spec_.hidden, spec_.latent)),
      dec_(mlp_spec(spec_.latent + EncoderSpec::kQueryDim, spec_.hidden, 1)) {
  TEMPER_CHECK(spec_.latent >= 1) << "context encoder: latent must be >= 1, got " << spec_.latent;
}

void ContextEncoder::init(float* p, uint64_t seed) const {
  enc_.init(p, mix_seed(seed, 21));
  dec_.init(p + enc_.param_count(), mix_seed(seed, 22));
}

void ContextEncoder::encode(const float* p, const float* ctx, int64_t B, float* e) const {
  enc_.forward(p, ctx, B, e);
}

double ContextEncoder::train_step(float* p, nn::AdamW& opt, float lr, const float* ctx, const float* query,
                                  const float* reward, int64_t B) const {
  const int64_t L = spec_.latent, Q = EncoderSpec::kQueryDim;
  std::vector<float> e(B * L), din(B * (L + Q)), pred(B), dpred(B), de(B * L), grad(param_count(), 0.f);
  nn::Mlp::Tape te, td;
  enc_.forward(p, ctx, B, e.data(), &te);
  for (int64_t r = 0; r < B; ++r) {
    std::copy(&e[r * L], &e[(r + 1) * L], &din[r * (L + Q)]);
    std::copy(query + r * Q, query + (r + 1) * Q, &din[r * (L + Q) + L]);
  }
  dec_.forward(p + enc_.param_count(), din.data(), B, pred.data(), &td);
  double loss = 0;
  for (int64_t r = 0; r < B; ++r) {
    double d = double(pred[r]) - reward[r];
    loss += d * d / double(B);
    dpred[r] = static_cast<float>(2.0 * d / double(B));
  }
  std::vector<float> ddin(B * (L + Q));
  dec_.backward(p + enc_.param_count(), td, dpred.data(), grad.data() + enc_.param_count(), ddin.data());
  for (int64_t r = 0; r < B; ++r) std::copy(&ddin[r * (L + Q)], &ddin[r * (L + Q) + L], &de[r * L]);
  enc_.backward(p, te, de.data(), grad.data());
  opt.update(p, grad.data(), lr, 1.0);
  return loss;
}

}  // namespace temper::control
