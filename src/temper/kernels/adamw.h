// AdamW with decoupled weight decay, exactly torch.optim.AdamW's update (p *= 1 - lr*wd, then the
// bias-corrected Adam step), over one flat buffer; global gradient-norm clipping as
// torch.nn.utils.clip_grad_norm_ (coef = max_norm / (norm + 1e-6), applied when < 1).
// Norms sum fixed blocks in a fixed order: the same bits for any thread count.
#pragma once

#include <cstdint>

namespace temper::kernels {

struct AdamWConfig {  // the learning rate comes per step from the schedule
  float beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f, weight_decay = 0.01f;
};

// step counts from 1 (bias corrections 1 - beta^step).
void adamw_step(float* p, const float* g, float* m, float* v, int64_t n, const AdamWConfig& c, float lr, int64_t step);
double grad_norm(const float* g, int64_t n);
// Returns the norm before clipping; scales g in place when norm > max_norm (max_norm <= 0: no clipping).
double clip_grad_norm(float* g, int64_t n, double max_norm);

}  // namespace temper::kernels
