// A frozen feature map phi: samples x [B, in_dim] -> features [B, dim], what the metrics (Frechet
// distance, MMD, precision/recall) and the discriminator of DG-RL see (spec methods-other section 4:
// "a frozen pretrained embedding space"). Two implement it: fixed random Fourier features for 2-D data
// (fourier_features.h) and the small image network trained once on the procedural images (image_features.h).
// Deterministic and frozen: no training state, the same bits for the same input whatever B or the threads.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace temper::flow {

class Features {
 public:
  virtual ~Features() = default;
  virtual std::string name() const = 0;  // "fourier", "image_cnn": metrics name the space they were measured in
  virtual int64_t in_dim() const = 0;    // elements of one sample: VelocityModel::dim()
  virtual int64_t dim() const = 0;       // elements of one feature row
  // out [B, dim()] for x [B, in_dim()].
  virtual void embed(const float* x, int64_t B, float* out) const = 0;
};

// All rows at once: x holds n = x.size() / in_dim() samples; returns [n, dim()].
std::vector<float> embed_all(const Features& f, const std::vector<float>& x);

}  // namespace temper::flow
