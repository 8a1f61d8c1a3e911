// The procedural images (src/temper/flow/image_data.h): known pixels of hand-placed glyphs, values in
// [-1, 1], image i a pure function of (seed, i), labels spread over the classes, refusals.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "temper/core/error.h"
#include "temper/flow/image_data.h"

using namespace temper;
using namespace temper::flow;

namespace {

float px(const std::vector<float>& img, int64_t S, int64_t c, int64_t i, int64_t j) {
  return img[(c * S + i) * S + j];
}

ImageParams red_at_centre(int32_t label, double size) {
  ImageParams p;
  p.label = label, p.cx = 8, p.cy = 8, p.size = size;
  p.fg = {1.f, 0.f, 0.f}, p.bg = {0.f, 0.f, 0.f};
  return p;
}

}  // namespace

TEST(ImageData, KnownPixelsOfADisc) {
  ImageData d({});  // shapes, 16 x 16 RGB
  std::vector<float> img(d.dim());
  d.render(red_at_centre(0, 5.0), img.data());
  EXPECT_EQ(px(img, 16, 0, 8, 8), 1.f);    // centre: foreground red
  EXPECT_EQ(px(img, 16, 1, 8, 8), -1.f);   // no green
  EXPECT_EQ(px(img, 16, 0, 8, 12), 1.f);   // every subsample within 4.95 px of the centre
  EXPECT_EQ(px(img, 16, 0, 8, 13), -1.f);  // every subsample beyond 5.1 px
  EXPECT_EQ(px(img, 16, 0, 0, 0), -1.f);
  const float edge = px(img, 16, 0, 4, 4);  // on the circle (4.2 .. 5.7 px from the centre): partly covered
  EXPECT_GT(edge, -1.f);
  EXPECT_LT(edge, 1.f);
}

TEST(ImageData, RingHasAHoleAndDigitOneItsLeftEmpty) {
  ImageData shapes({});
  std::vector<float> img(shapes.dim());
  shapes.render(red_at_centre(4, 6.0), img.data());
  EXPECT_EQ(px(img, 16, 0, 8, 8), -1.f);  // inside the hole (radius 3.3)
  EXPECT_EQ(px(img, 16, 0, 8, 3), 1.f);   // on the band (4.1 .. 4.9 px from the centre)
  ImageDataConfig c;
  c.kind = ImageKind::digits, c.channels = 1;
  ImageData digits(c);
  std::vector<float> one(digits.dim()), eight(digits.dim());
  ImageParams p = red_at_centre(1, 6.0);  // box 6 px wide, 12 high
  digits.render(p, one.data());
  p.label = 8;
  digits.render(p, eight.data());
  EXPECT_EQ(px(one, 16, 0, 5, 5), -1.f);   // left stroke: off for "1"
  EXPECT_EQ(px(eight, 16, 0, 5, 5), 1.f);  // and on for "8"
  EXPECT_EQ(px(one, 16, 0, 5, 10), 1.f);   // right stroke: on for both
  EXPECT_EQ(digits.class_name(7), "7");
  EXPECT_EQ(shapes.class_name(2), "triangle");
}

TEST(ImageData, DeterministicPerIndexAndInRange) {
  ImageData d({});
  std::vector<float> a, b;
  std::vector<int32_t> ya, yb;
  d.sample(64, 3, a, ya);
  d.sample(16, 3, b, yb);
  EXPECT_TRUE(std::equal(b.begin(), b.end(), a.begin()));  // image i depends on (seed, i) only
  EXPECT_TRUE(std::equal(yb.begin(), yb.end(), ya.begin()));
  d.sample(16, 4, b, yb);
  EXPECT_FALSE(std::equal(b.begin(), b.end(), a.begin()));
  EXPECT_TRUE(std::all_of(a.begin(), a.end(), [](float v) { return v >= -1.f && v <= 1.f; }));
  const auto c2 = d.sample_class(5, 2, 9), c2b = d.sample_class(5, 2, 9);
  EXPECT_EQ(c2, c2b);
  // labels spread over the 6 classes
  d.sample(1200, 5, a, ya);
  std::vector<int> count(6, 0);
  for (int32_t y : ya) ++count[y];
  for (int k = 0; k < 6; ++k) EXPECT_NEAR(count[k], 200, 50) << "class " << k;
  EXPECT_EQ(d.labels(1200, 5), ya);  // the labels alone, without rendering
}

TEST(ImageData, Refusals) {
  ImageDataConfig c;
  c.channels = 2;
  EXPECT_THROW(ImageData{c}, Error);
  c = {};
  c.classes = 7;
  EXPECT_THROW(ImageData{c}, Error);
  c = {};
  c.image = 4;
  EXPECT_THROW(ImageData{c}, Error);
  ImageData d({});
  Rng rng(1);
  EXPECT_THROW(d.draw(6, rng), Error);
}
