#include "temper/kernels/adamw.h"

#include <cmath>
#include <vector>

#include "temper/core/thread_pool.h"
#include "temper/kernels/cpu/isa_table.h"

namespace temper::kernels {

namespace {
constexpr int64_t kBlock = 1 << 16;
}

void adamw_step(float* p, const float* g, float* m, float* v, int64_t n, const AdamWConfig& c, float lr, int64_t step) {
  const IsaTable& t = isa_table();
  float bc1 = 1.0f - static_cast<float>(std::pow(static_cast<double>(c.beta1), static_cast<double>(step)));
  float bc2 = 1.0f - static_cast<float>(std::pow(static_cast<double>(c.beta2), static_cast<double>(step)));
  parallel_for(n, kBlock, [&](int64_t b, int64_t e) {
    t.adamw(p + b, g + b, m + b, v + b, e - b, lr, c.beta1, c.beta2, c.eps, c.weight_decay, bc1, bc2);
  });
}

double grad_norm(const float* g, int64_t n) {
  const IsaTable& t = isa_table();
  int64_t blocks = (n + kBlock - 1) / kBlock;
  std::vector<double> part(static_cast<size_t>(blocks));
  parallel_tasks(blocks, [&](int64_t i) {
    int64_t b = i * kBlock, e = b + kBlock < n ? b + kBlock : n;
    part[static_cast<size_t>(i)] = t.sumsq(g + b, e - b);
  });
  double s = 0;
  for (double x : part) s += x;
  return std::sqrt(s);
}

double clip_grad_norm(float* g, int64_t n, double max_norm) {
  double norm = grad_norm(g, n);
  if (max_norm <= 0) return norm;
  double coef = max_norm / (norm + 1e-6);
  if (coef < 1.0) {
    const IsaTable& t = isa_table();
    float c = static_cast<float>(coef);
    parallel_for(n, kBlock, [&](int64_t b, int64_t e) { t.scale(g + b, e - b, c); });
  }
  return norm;
}

}  // namespace temper::kernels
