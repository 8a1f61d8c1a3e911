// Training data of a flow run: labelled samples drawn deterministically (sample i a pure function of
// (seed, i)). Two implement it: the 2-D distributions with known densities (Toy2dSource over toy2d.h) and
// the procedural images (image_data.h). known() gives the true density where there is one (2-D).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "temper/flow/toy2d.h"

namespace temper::flow {

class DataSource {
 public:
  virtual ~DataSource() = default;
  virtual std::string name() const = 0;
  virtual int64_t dim() const = 0;      // elements of one sample
  virtual int64_t classes() const = 0;  // labels 0..classes()-1
  // x [n, dim] and labels y [n] from the joint.
  virtual void sample(int64_t n, uint64_t seed, std::vector<float>& x, std::vector<int32_t>& y) const = 0;
  // The labels y [n] that sample(n, seed) draws, without drawing the samples (DG-RL's groups take real labels).
  virtual std::vector<int32_t> labels(int64_t n, uint64_t seed) const {
    std::vector<float> x;
    std::vector<int32_t> y;
    sample(n, seed, x, y);
    return y;
  }
  virtual const Toy2d* known() const { return nullptr; }           // the true density, when there is one
  virtual std::vector<int64_t> image_shape() const { return {}; }  // [C, S, S] for images, else empty
};

class Toy2dSource final : public DataSource {
 public:
  explicit Toy2dSource(Toy2dConfig c) : toy_(std::move(c)) {}
  std::string name() const override { return "toy2d/" + toy_.config().kind; }
  int64_t dim() const override { return 2; }
  int64_t classes() const override { return toy_.classes(); }
  void sample(int64_t n, uint64_t seed, std::vector<float>& x, std::vector<int32_t>& y) const override {
    toy_.sample(n, seed, x, y);
  }
  std::vector<int32_t> labels(int64_t n, uint64_t seed) const override { return toy_.labels(n, seed); }
  const Toy2d* known() const override { return &toy_; }

 private:
  Toy2d toy_;
};

}  // namespace temper::flow
