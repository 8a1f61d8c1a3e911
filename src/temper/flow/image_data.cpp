#include "temper/flow/image_data.h"

#include <cmath>

#include "temper/core/error.h"
#include "temper/core/thread_pool.h"

namespace temper::flow {
namespace {

constexpr int kSub = 4;  // subsamples per pixel side
const char* const kShapeNames[kShapeClasses] = {"disc", "square", "triangle", "cross", "ring", "frame"};

// 7-segment masks, bits a..g = 0..6 (a top, b top right, c bottom right, d bottom, e bottom left, f top left,
// g middle).
constexpr uint8_t kSegments[kDigitClasses] = {0x3F, 0x06, 0x5B, 0x4F, 0x66, 0x6D, 0x7D, 0x07, 0x7F, 0x6F};

bool in_shape(int32_t label, double u, double v) {
  const double au = std::fabs(u), av = std::fabs(v), r2 = u * u + v * v;
  switch (label) {
    case 0:
      return r2 <= 1.0;  // disc
    case 1:
      return au <= 0.8 && av <= 0.8;  // square
    case 2:
      return v >= -0.5 && std::sqrt(3.0) * u + v <= 1.0 && -std::sqrt(3.0) * u + v <= 1.0;  // triangle
    case 3:
      return (au <= 0.3 && av <= 1.0) || (av <= 0.3 && au <= 1.0);  // cross
    case 4:
      return r2 <= 1.0 && r2 >= 0.55 * 0.55;  // ring
    default:
      return std::max(au, av) <= 0.85 && std::max(au, av) >= 0.5;  // frame
  }
}

// A digit in a box u in [-0.5, 0.5], v in [-1, 1]; strokes 0.22 thick.
bool in_digit(int32_t label, double u, double v) {
  constexpr double t = 0.22;
  const uint8_t m = kSegments[label];
  auto on = [&](int s) { return (m >> s) & 1; };
  const bool left = u >= -0.5 && u <= -0.5 + t, right = u <= 0.5 && u >= 0.5 - t, across = u >= -0.5 && u <= 0.5;
  return (on(0) && across && v <= 1.0 && v >= 1.0 - t) || (on(1) && right && v >= 0.0 && v <= 1.0) ||
         (on(2) && right && v <= 0.0 && v >= -1.0) || (on(3) && across && v >= -1.0 && v <= -1.0 + t) ||
         (on(4) && left && v <= 0.0 && v >= -1.0) || (on(5) && left && v >= 0.0 && v <= 1.0) ||
         (on(6) && across && std::fabs(v) <= t / 2);
}

// A saturated, bright colour from three uniforms (HSV with s in [0.6, 1], v in [0.7, 1]).
std::array<float, 3> bright_colour(float h, float s, float v) {
  s = 0.6f + 0.4f * s, v = 0.7f + 0.3f * v;
  const float hh = h * 6.0f, f = hh - std::floor(hh);
  const float p = v * (1 - s), q = v * (1 - s * f), t = v * (1 - s * (1 - f));
  switch (static_cast<int>(hh) % 6) {
    case 0:
      return {v, t, p};
    case 1:
      return {q, v, p};
    case 2:
      return {p, v, t};
    case 3:
      return {p, q, v};
    case 4:
      return {t, p, v};
    default:
      return {v, p, q};
  }
}

}  // namespace

void ImageDataConfig::validate() const {
  TEMPER_CHECK(image >= 8 && image <= 256) << "[data] image = " << image << ": expected 8..256";
  TEMPER_CHECK(channels == 1 || channels == 3) << "[data] channels = " << channels << ": expected 1 or 3";
  const int64_t all = kind == ImageKind::shapes ? kShapeClasses : kDigitClasses;
  TEMPER_CHECK(classes >= 0 && classes <= all) << "[data] classes = " << classes << ": expected 0 (all) or 1.." << all
                                               << " for kind " << enum_name(kImageKindNames, kind);
}

void ImageDataConfig::visit(KeyVisitor& v) {
  v("kind", kind, "procedural images: shapes (disc, square, triangle, cross, ring, frame) or 7-segment digits",
    kImageKindNames);
  v("image", image, "image side S in pixels");
  v("channels", channels, "1 (grey) or 3 (RGB)");
  v("classes", classes, "0: every class of the kind; else the first `classes`");
}

ImageData::ImageData(ImageDataConfig c) : cfg_(c) {
  cfg_.validate();
}

std::string ImageData::class_name(int32_t y) const {
  return cfg_.kind == ImageKind::shapes ? kShapeNames[y] : std::to_string(y);
}

ImageParams ImageData::draw(int32_t y, Rng& rng) const {
  TEMPER_CHECK(y >= 0 && y < classes()) << "image data: label " << y << " (expected 0.." << classes() - 1 << ")";
  ImageParams p;
  const double S = static_cast<double>(cfg_.image);
  p.label = y;
  const bool digit = cfg_.kind == ImageKind::digits;
  // size: the glyph's radius (shapes) or half height (digits), in pixels
  p.size = S * (digit ? 0.3 + 0.12 * rng.uniform() : 0.22 + 0.16 * rng.uniform());
  const double half_w = digit ? p.size * 0.5 : p.size, half_h = p.size, margin = 0.5;
  p.cx = half_w + margin + (S - 2 * (half_w + margin)) * rng.uniform();
  p.cy = half_h + margin + (S - 2 * (half_h + margin)) * rng.uniform();
  p.angle = digit ? 0.0 : 2.0 * M_PI * rng.uniform();
  const float h = rng.uniform(), s = rng.uniform(), v = rng.uniform(), bg = 0.25f * rng.uniform();
  p.fg = cfg_.channels == 3 ? bright_colour(h, s, v) : std::array<float, 3>{0.7f + 0.3f * v, 0.f, 0.f};
  p.bg = {bg, bg, bg};
  return p;
}

bool ImageData::inside(int32_t label, double u, double v) const {
  return cfg_.kind == ImageKind::shapes ? in_shape(label, u, v) : in_digit(label, u, v);
}

void ImageData::render(const ImageParams& p, float* out) const {
  const int64_t S = cfg_.image, C = cfg_.channels;
  const double ca = std::cos(p.angle), sa = std::sin(p.angle);
  for (int64_t i = 0; i < S; ++i)
    for (int64_t j = 0; j < S; ++j) {
      int hits = 0;
      for (int sy = 0; sy < kSub; ++sy)
        for (int sx = 0; sx < kSub; ++sx) {
          const double x = static_cast<double>(j) + (sx + 0.5) / kSub - p.cx;
          const double y = p.cy - (static_cast<double>(i) + (sy + 0.5) / kSub);  // up is +v
          hits += inside(p.label, (ca * x + sa * y) / p.size, (-sa * x + ca * y) / p.size);
        }
      const float cover = static_cast<float>(hits) / (kSub * kSub);
      for (int64_t c = 0; c < C; ++c) {
        const float value = p.bg[c] + cover * (p.fg[c] - p.bg[c]);
        out[(c * S + i) * S + j] = 2.0f * value - 1.0f;
      }
    }
}

void ImageData::sample(int64_t n, uint64_t seed, std::vector<float>& x, std::vector<int32_t>& y) const {
  x.resize(static_cast<size_t>(n * dim()));
  y.resize(static_cast<size_t>(n));
  parallel_for(n, 8, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      Rng rng(seed, static_cast<uint64_t>(i));
      const int32_t label = first_label(rng);
      y[static_cast<size_t>(i)] = label;
      render(draw(label, rng), x.data() + i * dim());
    }
  });
}

std::vector<int32_t> ImageData::labels(int64_t n, uint64_t seed) const {
  std::vector<int32_t> y(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    Rng rng(seed, static_cast<uint64_t>(i));
    y[static_cast<size_t>(i)] = first_label(rng);
  }
  return y;
}

std::vector<float> ImageData::sample_class(int64_t n, int32_t y, uint64_t seed) const {
  std::vector<float> x(static_cast<size_t>(n * dim()));
  const uint64_t s = mix_seed(seed, static_cast<uint64_t>(y));
  parallel_for(n, 8, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      Rng rng(s, static_cast<uint64_t>(i));
      render(draw(y, rng), x.data() + i * dim());
    }
  });
  return x;
}

}  // namespace temper::flow
