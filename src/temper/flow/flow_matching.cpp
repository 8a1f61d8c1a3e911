#include "temper/flow/flow_matching.h"

#include "temper/core/error.h"
#include "temper/core/rng.h"

namespace temper::flow {

double fm_loss_grad(VelocityModel& m, const FmBatch& b, float* grad) {
  const int64_t d = m.dim(), n = b.B * d;
  TEMPER_CHECK(b.B > 0 && b.x0 && b.y && b.t && b.eps) << "flow matching: an empty or incomplete batch";
  std::vector<float> xt(static_cast<size_t>(n)), v(static_cast<size_t>(n)), dv(static_cast<size_t>(n));
  for (int64_t i = 0; i < b.B; ++i) {
    const double t = b.t[i];
    for (int64_t j = 0; j < d; ++j)
      xt[static_cast<size_t>(i * d + j)] = static_cast<float>((1 - t) * b.x0[i * d + j] + t * b.eps[i * d + j]);
  }
  m.forward(xt.data(), b.t, b.y, b.B, v.data(), true);
  double wsum = 0;
  for (int64_t i = 0; i < b.B; ++i) wsum += b.w ? b.w[i] : 1.0;
  TEMPER_CHECK(wsum > 0) << "flow matching: the batch's weights sum to " << wsum;
  double loss = 0;
  for (int64_t i = 0; i < b.B; ++i) {
    const double wi = (b.w ? b.w[i] : 1.0) / wsum, scale = wi / static_cast<double>(d);
    for (int64_t j = 0; j < d; ++j) {
      const size_t k = static_cast<size_t>(i * d + j);
      const double e = static_cast<double>(v[k]) - (static_cast<double>(b.eps[k]) - b.x0[k]);
      loss += scale * e * e;
      dv[k] = static_cast<float>(2 * scale * e);
    }
  }
  m.backward(dv.data(), grad);
  return loss;
}

FmDraw fm_draw(int64_t B, int64_t dim, const int32_t* y, int64_t classes, double p_uncond, uint64_t seed) {
  FmDraw d;
  d.t.resize(static_cast<size_t>(B));
  d.eps.resize(static_cast<size_t>(B * dim));
  d.y.assign(y, y + B);
  for (int64_t i = 0; i < B; ++i) {
    Rng rng(seed, static_cast<uint64_t>(i));
    d.t[static_cast<size_t>(i)] = rng.uniform();
    if (rng.uniform() < p_uncond) d.y[static_cast<size_t>(i)] = static_cast<int32_t>(classes);
    for (int64_t j = 0; j < dim; ++j) d.eps[static_cast<size_t>(i * dim + j)] = rng.normal();
  }
  return d;
}

}  // namespace temper::flow
