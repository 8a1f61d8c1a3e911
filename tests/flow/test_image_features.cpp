// The frozen image feature network (src/temper/flow/image_features.h) and its convolution pieces
// (image_conv.h): the 3x3 convolution against a direct sum and its backward against finite differences,
// average pooling's backward as its transpose; trained on the procedural shapes, the CNN and the MLP tell the
// classes apart on fresh images, their parameters are the same bits for 1 and 2 threads, the features separate
// classes (class means further apart than the spread within a class).
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "flow/image_features_config.h"
#include "temper/core/error.h"
#include "temper/core/rng.h"
#include "temper/core/thread_pool.h"
#include "temper/flow/image_conv.h"
#include "temper/flow/image_features.h"

using namespace temper;
using namespace temper::flow;

namespace {

std::vector<float> randn(int64_t n, uint64_t stream) {
  std::vector<float> v(static_cast<size_t>(n));
  rng_fill_normal(9, stream, v);
  return v;
}

// The direct sum: y[b, i, j, o] = bias[o] + sum_{c, di, dj} w[o, c, di + 1, dj + 1] x[b, i + di, j + dj, c].
double conv_ref(const std::vector<float>& p, const std::vector<float>& x, int64_t H, int64_t W, int64_t cin,
                int64_t cout, int64_t b, int64_t i, int64_t j, int64_t o) {
  double s = p[cout * cin * 9 + o];
  for (int64_t c = 0; c < cin; ++c)
    for (int64_t di = -1; di <= 1; ++di)
      for (int64_t dj = -1; dj <= 1; ++dj) {
        const int64_t ii = i + di, jj = j + dj;
        if (ii < 0 || ii >= H || jj < 0 || jj >= W) continue;
        s += static_cast<double>(p[(o * cin + c) * 9 + (di + 1) * 3 + dj + 1]) * x[((b * H + ii) * W + jj) * cin + c];
      }
  return s;
}

}  // namespace

TEST(ImageConv, ForwardMatchesDirectSumAndBackwardFiniteDifferences) {
  const int64_t B = 2, H = 5, W = 6, cin = 3, cout = 4;
  Conv3x3 cv{cin, cout};
  auto p = randn(cv.param_count(), 1), x = randn(B * H * W * cin, 2), r = randn(B * H * W * cout, 3);
  std::vector<float> cols, y(B * H * W * cout);
  cv.forward(p.data(), x.data(), B, H, W, cols, y.data());
  for (int64_t b = 0; b < B; ++b)
    for (int64_t i = 0; i < H; ++i)
      for (int64_t j = 0; j < W; ++j)
        for (int64_t o = 0; o < cout; ++o)
          EXPECT_NEAR(y[((b * H + i) * W + j) * cout + o], conv_ref(p, x, H, W, cin, cout, b, i, j, o), 1e-5);
  // loss = sum(y * r): d/dp and d/dx against central differences of the direct sum (linear: exact up to rounding)
  std::vector<float> grad(p.size(), 0.f), dx(x.size());
  cv.backward(p.data(), cols, r.data(), B, H, W, grad.data(), dx.data());
  auto loss = [&](const std::vector<float>& pp, const std::vector<float>& xx) {
    double s = 0;
    for (int64_t b = 0; b < B; ++b)
      for (int64_t i = 0; i < H; ++i)
        for (int64_t j = 0; j < W; ++j)
          for (int64_t o = 0; o < cout; ++o)
            s += conv_ref(pp, xx, H, W, cin, cout, b, i, j, o) * r[((b * H + i) * W + j) * cout + o];
    return s;
  };
  for (int64_t k : {0L, 17L, 50L, 107L, cout * cin * 9 + 2}) {
    auto pp = p, pm = p;
    pp[k] += 0.01f, pm[k] -= 0.01f;
    EXPECT_NEAR(grad[k], (loss(pp, x) - loss(pm, x)) / (pp[k] - pm[k]), 1e-3) << "param " << k;
  }
  for (int64_t k : {0L, 7L, 31L, 89L, B * H * W * cin - 1}) {
    auto xp = x, xm = x;
    xp[k] += 0.01f, xm[k] -= 0.01f;
    EXPECT_NEAR(dx[k], (loss(p, xp) - loss(p, xm)) / (xp[k] - xm[k]), 1e-3) << "input " << k;
  }
}

TEST(ImageConv, PoolingAndLayout) {
  // 1 image 4x4, 2 channels; channel c of pixel (i, j) = 10 c + 4 i + j
  std::vector<float> chw(32), x(32), y(8), dx(32);
  for (int c = 0; c < 2; ++c)
    for (int i = 0; i < 16; ++i) chw[c * 16 + i] = 10.f * c + i;
  chw_to_nhwc(chw.data(), 1, 2, 4, 4, x.data());
  EXPECT_EQ(x[(1 * 4 + 2) * 2 + 1], 10.f + 6.f);
  avgpool2_fwd(x.data(), 1, 4, 4, 2, y.data());
  EXPECT_EQ(y[0], (0.f + 1 + 4 + 5) / 4);                     // block (0, 0), channel 0
  EXPECT_EQ(y[3 * 2 + 1], 10.f + (10 + 11 + 14 + 15) / 4.f);  // block (1, 1), channel 1
  // the backward is the transpose: <pool(x), g> == <x, pool_bwd(g)>
  std::vector<float> g{1, 2, 3, 4, 5, 6, 7, 8};
  avgpool2_bwd(g.data(), 1, 4, 4, 2, dx.data());
  double a = 0, b = 0;
  for (int i = 0; i < 8; ++i) a += y[i] * g[i];
  for (int i = 0; i < 32; ++i) b += x[i] * dx[i];
  EXPECT_NEAR(a, b, 1e-4);
}

namespace {
// The features separate two classes: the class means further apart than the spread within a class.
void expect_separates(const Features& f, const ImageData& data) {
  const int64_t n = 200, D = f.dim();
  std::vector<std::vector<double>> mean(2, std::vector<double>(D, 0));
  double within = 0;
  for (int y = 0; y < 2; ++y) {
    const auto x = data.sample_class(n, y == 0 ? 0 : 3, 11);  // discs vs crosses
    const auto e = embed_all(f, x);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t k = 0; k < D; ++k) mean[y][k] += e[i * D + k] / n;
    for (int64_t i = 0; i < n; ++i)
      for (int64_t k = 0; k < D; ++k) within += std::pow(e[i * D + k] - mean[y][k], 2) / (2 * n);
  }
  double between = 0;
  for (int64_t k = 0; k < D; ++k) between += std::pow(mean[0][k] - mean[1][k], 2);
  EXPECT_GT(between, 0.5 * within) << f.name() << ": between " << between << " within " << within;
}
}  // namespace

TEST(ImageFeatures, CnnLearnsTheClasses) {
  ImageDataConfig dc;
  dc.channels = 1;
  ImageData data(dc);
  const int before = num_threads();
  set_num_threads(1);
  ImageFeatures one(data, small_features(FeatureArch::cnn));
  set_num_threads(before);
  EXPECT_EQ(one.name(), "image_cnn");
  EXPECT_EQ(one.dim(), 32);
  EXPECT_EQ(one.in_dim(), 256);
  EXPECT_GT(one.report().heldout_accuracy, 0.6);  // chance: 1/6 (the default config: 0.96 on RGB shapes)
  expect_separates(one, data);
  // a batch's features are the rows' own: the same bits embedded one at a time
  const auto x = data.sample_class(3, 2, 5);
  const auto all = embed_all(one, x);
  std::vector<float> row(32);
  one.embed(x.data() + 2 * 256, 1, row.data());
  EXPECT_TRUE(std::equal(row.begin(), row.end(), all.begin() + 64));
}

TEST(ImageFeatures, CnnSameBitsForAnyThreadCount) {
  ImageData data({});
  ImageFeaturesConfig c = small_features(FeatureArch::cnn);
  c.conv = {4, 8};
  c.hidden = {16};
  c.steps = 20;
  const int before = num_threads();
  set_num_threads(1);
  ImageFeatures one(data, c);
  set_num_threads(2);
  ImageFeatures two(data, c);
  set_num_threads(before);
  ASSERT_EQ(one.params().size(), two.params().size());
  EXPECT_TRUE(std::equal(one.params().begin(), one.params().end(), two.params().begin()));
}

TEST(ImageFeatures, MlpLearnsTheClasses) {
  ImageDataConfig dc;
  dc.channels = 1;
  ImageData data(dc);
  const int before = num_threads();
  set_num_threads(1);
  ImageFeatures f(data, small_features(FeatureArch::mlp));
  set_num_threads(before);
  EXPECT_EQ(f.name(), "image_mlp");
  EXPECT_GT(f.report().heldout_accuracy, 0.45);  // chance: 1/6
  expect_separates(f, data);
}

TEST(ImageFeatures, Refusals) {
  ImageData data({});
  ImageFeaturesConfig c = small_features(FeatureArch::cnn);
  c.conv = {4, 4, 4, 4, 4};  // 16 is not a multiple of 32
  EXPECT_THROW(ImageFeatures(data, c), Error);
  c = small_features(FeatureArch::cnn);
  c.conv = {};
  EXPECT_THROW(ImageFeatures(data, c), Error);
}
