// A velocity field v_theta(x, t, y): what flow matching trains and the samplers integrate. Two models
// implement it: the 2-D MLP flow (tests, known densities) and the DiT over image patches. One flat
// parameter vector per model (params()), so the optimiser, checkpoints and the RL losses treat both alike.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace temper::flow {

class VelocityModel {
 public:
  virtual ~VelocityModel() = default;
  virtual int64_t dim() const = 0;      // elements of one sample x: 2 for the 2-D flow, C*H*W for images
  virtual int64_t classes() const = 0;  // labels y in [0, classes()); y == classes() is the null label (CFG)
  virtual int64_t param_count() const = 0;
  virtual std::span<float> params() = 0;
  virtual std::span<const float> params() const = 0;
  virtual void init_params(uint64_t seed) = 0;
  // v[B, dim] for x[B, dim], t[B], y[B]. With train, keeps what backward() needs (the last such forward only).
  virtual void forward(const float* x, const float* t, const int32_t* y, int64_t B, float* v, bool train) = 0;
  // Adds d loss / d params to grad[param_count()] for the last training forward, given dv = d loss / d v [B, dim].
  virtual void backward(const float* dv, float* grad) = 0;
  // Named tensors (name, shape) in the order and layout of params(): checkpoints write them as safetensors.
  virtual std::vector<std::pair<std::string, std::vector<int64_t>>> param_shapes() const = 0;
};

}  // namespace temper::flow
