#include "temper/flow/dit_embed.h"

#include <cmath>

#include "temper/core/thread_pool.h"

namespace temper::flow {

void patchify(const float* x, int64_t B, int64_t C, int64_t S, int64_t p, float* rows) {
  const int64_t g = S / p, T = g * g, P = C * p * p;
  parallel_for(B * T, 16, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t b = r / T, gi = (r % T) / g, gj = r % g;
      float* out = rows + r * P;
      for (int64_t c = 0; c < C; ++c)
        for (int64_t i = 0; i < p; ++i) {
          const float* src = x + ((b * C + c) * S + gi * p + i) * S + gj * p;
          for (int64_t j = 0; j < p; ++j) *out++ = src[j];
        }
    }
  });
}

namespace {
// Calls f(row element, image element) for every element of token row r, in (i, j, c) order.
template <class F>
void for_token_pixels(int64_t r, int64_t C, int64_t S, int64_t p, F&& f) {
  const int64_t g = S / p, T = g * g, b = r / T, gi = (r % T) / g, gj = r % g;
  int64_t e = r * C * p * p;
  for (int64_t i = 0; i < p; ++i)
    for (int64_t j = 0; j < p; ++j)
      for (int64_t c = 0; c < C; ++c) f(e++, ((b * C + c) * S + gi * p + i) * S + gj * p + j);
}
}  // namespace

void unpatchify(const float* rows, int64_t B, int64_t C, int64_t S, int64_t p, float* x) {
  const int64_t T = (S / p) * (S / p);
  parallel_for(B * T, 16, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) for_token_pixels(r, C, S, p, [&](int64_t e, int64_t px) { x[px] = rows[e]; });
  });
}

void unpatchify_bwd(const float* dx, int64_t B, int64_t C, int64_t S, int64_t p, float* drows) {
  const int64_t T = (S / p) * (S / p);
  parallel_for(B * T, 16, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) for_token_pixels(r, C, S, p, [&](int64_t e, int64_t px) { drows[e] = dx[px]; });
  });
}

std::vector<float> sincos_pos_embed(int64_t C, int64_t grid) {
  const int64_t half = C / 2, quarter = C / 4;
  std::vector<float> out(static_cast<size_t>(grid * grid * C));
  for (int64_t i = 0; i < grid; ++i)
    for (int64_t j = 0; j < grid; ++j) {
      float* row = out.data() + (i * grid + j) * C;
      const double pos[2] = {static_cast<double>(j), static_cast<double>(i)};  // column first, then row
      for (int64_t h = 0; h < 2; ++h)
        for (int64_t k = 0; k < quarter; ++k) {
          const double omega = 1.0 / std::pow(10000.0, static_cast<double>(k) / static_cast<double>(quarter));
          row[h * half + k] = static_cast<float>(std::sin(pos[h] * omega));
          row[h * half + quarter + k] = static_cast<float>(std::cos(pos[h] * omega));
        }
    }
  return out;
}

void timestep_embedding(const float* t, int64_t B, int64_t dim, double t_scale, float* out) {
  const int64_t half = dim / 2;
  for (int64_t b = 0; b < B; ++b) {
    const double s = static_cast<double>(t[b]) * t_scale;
    for (int64_t k = 0; k < half; ++k) {
      const double f = std::exp(-std::log(10000.0) * static_cast<double>(k) / static_cast<double>(half));
      out[b * dim + k] = static_cast<float>(std::cos(s * f));
      out[b * dim + half + k] = static_cast<float>(std::sin(s * f));
    }
  }
}

}  // namespace temper::flow
