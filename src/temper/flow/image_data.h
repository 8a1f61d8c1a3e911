// Procedural class-labelled images, rendered in C++ and deterministic (issue 38's image data): small
// S x S pictures of one shape per image (disc, square, triangle, cross, ring, frame) or one 7-segment
// digit, with a random position, size, rotation (shapes) and colours per image; pixels anti-aliased by
// 4 x 4 supersampling; values in [-1, 1] (2 * intensity - 1), layout [C, S, S]. Image i of a stream is a
// pure function of (seed, i): the same bits whatever the batch or the threads. Leaves out: textures,
// several objects per image, occlusion.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "temper/core/rng.h"
#include "temper/core/settings.h"

namespace temper::flow {

enum class ImageKind { shapes, digits };
inline constexpr EnumNames<ImageKind, 2> kImageKindNames{
    {{ImageKind::shapes, "shapes"}, {ImageKind::digits, "digits"}}};
inline constexpr int64_t kShapeClasses = 6;  // disc, square, triangle, cross, ring, frame
inline constexpr int64_t kDigitClasses = 10;

struct ImageDataConfig {
  ImageKind kind = ImageKind::shapes;
  int64_t image = 16;    // S (8..256)
  int64_t channels = 3;  // 1 (grey) or 3 (RGB)
  int64_t classes = 0;   // 0: all of the kind's (6 shapes, 10 digits); else the first `classes`
  int64_t num_classes() const {
    return classes > 0 ? classes : (kind == ImageKind::shapes ? kShapeClasses : kDigitClasses);
  }
  int64_t dim() const { return channels * image * image; }
  void validate() const;
  void visit(KeyVisitor& v);
};

// What one image shows: the label, the centre and size in pixels (x right, y down), the rotation in radians
// (shapes), foreground and background intensities in [0, 1] per channel (grey images use channel 0).
struct ImageParams {
  int32_t label = 0;
  double cx = 0, cy = 0, size = 0, angle = 0;
  std::array<float, 3> fg{}, bg{};
};

class ImageData {
 public:
  explicit ImageData(ImageDataConfig c);
  const ImageDataConfig& config() const { return cfg_; }
  int64_t dim() const { return cfg_.dim(); }
  int64_t classes() const { return cfg_.num_classes(); }
  std::string class_name(int32_t y) const;  // "disc", ..., or "0".."9"

  // Random position, size, rotation and colours for label y, drawn from rng.
  ImageParams draw(int32_t y, Rng& rng) const;
  void render(const ImageParams& p, float* out) const;  // out [C, S, S]
  // x [n, C*S*S] and labels y [n] (uniform over the classes); image i from stream i of seed.
  void sample(int64_t n, uint64_t seed, std::vector<float>& x, std::vector<int32_t>& y) const;
  std::vector<int32_t> labels(int64_t n, uint64_t seed) const;  // sample()'s y alone (each stream's first draw)
  // x [n, C*S*S] of label y; image i from stream i of mix_seed(seed, y).
  std::vector<float> sample_class(int64_t n, int32_t y, uint64_t seed) const;

 private:
  bool inside(int32_t label, double u, double v) const;  // the glyph in its own frame (radius 1, v up)
  // Image i's label: the first draw of its stream (sample() and labels() agree).
  int32_t first_label(Rng& rng) const {
    return static_cast<int32_t>(rng.next_u32() % static_cast<uint32_t>(classes()));
  }
  ImageDataConfig cfg_;
};

}  // namespace temper::flow
