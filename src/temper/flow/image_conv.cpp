#include "temper/flow/image_conv.h"

#include <cstring>

#include "temper/core/thread_pool.h"
#include "temper/kernels/bias.h"
#include "temper/kernels/matmul.h"

namespace temper::flow {

void chw_to_nhwc(const float* x, int64_t B, int64_t C, int64_t H, int64_t W, float* out) {
  for (int64_t b = 0; b < B; ++b)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t i = 0; i < H * W; ++i) out[(b * H * W + i) * C + c] = x[(b * C + c) * H * W + i];
}

namespace {
// Calls f(pixel row, column block of cols, source row or -1 outside the image) for the 9 taps of every pixel;
// column block t * cin .. of a cols row is tap t = (di + 1) * 3 + (dj + 1), matching the weight's [cin, 3, 3]
// order after the transposition in the weight view below.
template <class F>
void for_taps(int64_t B, int64_t H, int64_t W, F&& f) {
  parallel_for(B * H * W, 64, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t b = r / (H * W), i = (r / W) % H, j = r % W;
      for (int64_t di = -1; di <= 1; ++di)
        for (int64_t dj = -1; dj <= 1; ++dj) {
          const int64_t ii = i + di, jj = j + dj, t = (di + 1) * 3 + (dj + 1);
          f(r, t, ii >= 0 && ii < H && jj >= 0 && jj < W ? (b * H + ii) * W + jj : -1);
        }
    }
  });
}

// The weight [cout, cin, 3, 3] as [cout, 9 * cin] in cols' (tap, channel) order.
std::vector<float> tap_major(const float* w, int64_t cin, int64_t cout) {
  std::vector<float> out(static_cast<size_t>(cout * cin * 9));
  for (int64_t o = 0; o < cout; ++o)
    for (int64_t c = 0; c < cin; ++c)
      for (int64_t t = 0; t < 9; ++t) out[(o * 9 + t) * cin + c] = w[(o * cin + c) * 9 + t];
  return out;
}
}  // namespace

void Conv3x3::forward(const float* p, const float* x, int64_t B, int64_t H, int64_t W, std::vector<float>& cols,
                      float* y) const {
  const int64_t N = B * H * W, K = 9 * cin;
  cols.resize(static_cast<size_t>(N * K));
  for_taps(B, H, W, [&](int64_t r, int64_t t, int64_t src) {
    float* dst = cols.data() + r * K + t * cin;
    if (src < 0)
      std::memset(dst, 0, static_cast<size_t>(cin) * sizeof(float));
    else
      std::memcpy(dst, x + src * cin, static_cast<size_t>(cin) * sizeof(float));
  });
  const std::vector<float> wt = tap_major(p, cin, cout);
  kernels::gemm(false, true, N, cout, K, cols.data(), K, wt.data(), K, 0.f, y, cout);
  kernels::bias_add(y, p + cout * K, N, cout);
}

void Conv3x3::backward(const float* p, const std::vector<float>& cols, const float* dy, int64_t B, int64_t H, int64_t W,
                       float* grad, float* dx) const {
  const int64_t N = B * H * W, K = 9 * cin;
  std::vector<float> dwt(static_cast<size_t>(cout * K), 0.f);
  kernels::gemm(true, false, cout, K, N, dy, cout, cols.data(), K, 0.f, dwt.data(), K);
  for (int64_t o = 0; o < cout; ++o)
    for (int64_t c = 0; c < cin; ++c)
      for (int64_t t = 0; t < 9; ++t) grad[(o * cin + c) * 9 + t] += dwt[(o * 9 + t) * cin + c];
  kernels::bias_grad(dy, grad + cout * K, N, cout);
  if (!dx) return;
  const std::vector<float> wt = tap_major(p, cin, cout);
  std::vector<float> dcols(static_cast<size_t>(N * K));
  kernels::gemm(false, false, N, K, cout, dy, cout, wt.data(), K, 0.f, dcols.data(), K);
  // col2im: each input pixel gathers the taps that read it (its 9 neighbours' columns), in a fixed order
  std::memset(dx, 0, static_cast<size_t>(N * cin) * sizeof(float));
  parallel_for(N, 64, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t b = r / (H * W), i = (r / W) % H, j = r % W;
      float* out = dx + r * cin;
      for (int64_t di = -1; di <= 1; ++di)
        for (int64_t dj = -1; dj <= 1; ++dj) {
          const int64_t ii = i - di, jj = j - dj;  // the pixel whose tap (di, dj) reads this one
          if (ii < 0 || ii >= H || jj < 0 || jj >= W) continue;
          const float* src = dcols.data() + ((b * H + ii) * W + jj) * K + ((di + 1) * 3 + (dj + 1)) * cin;
          for (int64_t c = 0; c < cin; ++c) out[c] += src[c];
        }
    }
  });
}

void avgpool2_fwd(const float* x, int64_t B, int64_t H, int64_t W, int64_t C, float* y) {
  const int64_t h = H / 2, w = W / 2;
  parallel_for(B * h * w, 64, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t b = r / (h * w), i = (r / w) % h, j = r % w;
      const float* a = x + ((b * H + 2 * i) * W + 2 * j) * C;
      const float* c2 = a + W * C;
      for (int64_t c = 0; c < C; ++c) y[r * C + c] = 0.25f * (a[c] + a[C + c] + c2[c] + c2[C + c]);
    }
  });
}

void avgpool2_bwd(const float* dy, int64_t B, int64_t H, int64_t W, int64_t C, float* dx) {
  parallel_for(B * H * W, 64, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t b = r / (H * W), i = (r / W) % H, j = r % W;
      const float* g = dy + ((b * (H / 2) + i / 2) * (W / 2) + j / 2) * C;
      for (int64_t c = 0; c < C; ++c) dx[r * C + c] = 0.25f * g[c];
    }
  });
}

}  // namespace temper::flow
