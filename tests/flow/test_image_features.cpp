// The frozen image feature network (src/temper/flow/image_features.h): trained on the procedural shapes it
// tells the classes apart on fresh images, its parameters are the same bits for 1 and 2 threads, and its
// features separate classes (class means further apart than the spread within a class).
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "temper/core/thread_pool.h"
#include "temper/flow/image_features.h"

using namespace temper;
using namespace temper::flow;

namespace {
ImageFeaturesConfig small() {
  ImageFeaturesConfig c;
  c.hidden = {128};
  c.dim = 32;
  c.train_images = 3000;
  c.steps = 300;
  c.batch = 64;
  c.lr = 2e-3;
  return c;
}
}  // namespace

TEST(ImageFeatures, LearnsTheClassesDeterministically) {
  ImageDataConfig dc;
  dc.channels = 1;
  ImageData data(dc);
  const int before = num_threads();
  set_num_threads(1);
  ImageFeatures one(data, small());
  set_num_threads(2);
  ImageFeatures two(data, small());
  set_num_threads(before);
  ASSERT_EQ(one.params().size(), two.params().size());
  EXPECT_TRUE(std::equal(one.params().begin(), one.params().end(), two.params().begin()));
  EXPECT_GT(one.report().heldout_accuracy, 0.6);  // chance: 1/6
  EXPECT_EQ(one.dim(), 32);
  EXPECT_EQ(one.in_dim(), 256);
  // features: between-class spread of the means over the within-class spread
  const int64_t n = 200;
  std::vector<std::vector<double>> mean(2, std::vector<double>(32, 0));
  double within = 0;
  for (int y = 0; y < 2; ++y) {
    const auto x = data.sample_class(n, y == 0 ? 0 : 3, 11);  // discs vs crosses
    const auto f = embed_all(one, x);
    for (int64_t i = 0; i < n; ++i)
      for (int k = 0; k < 32; ++k) mean[y][k] += f[i * 32 + k] / n;
    for (int64_t i = 0; i < n; ++i)
      for (int k = 0; k < 32; ++k) within += std::pow(f[i * 32 + k] - mean[y][k], 2) / (2 * n);
  }
  double between = 0;
  for (int k = 0; k < 32; ++k) between += std::pow(mean[0][k] - mean[1][k], 2);
  EXPECT_GT(between, 0.5 * within) << "between " << between << " within " << within;
  std::printf("held-out accuracy %.3f, final loss %.3f, between %.3f, within %.3f\n", one.report().heldout_accuracy,
              one.report().final_loss, between, within);
}
