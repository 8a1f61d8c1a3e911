#include "temper/nn/mlp.h"

#include <cmath>
#include <span>

#include "temper/core/error.h"
#include "temper/core/rng.h"
#include "temper/kernels/matmul.h"

namespace temper::nn {

namespace {

float sigmoid(float x) {
  return 1.f / (1.f + std::exp(-x));
}

}  // namespace

void activate(Act a, const float* x, float* y, int64_t n) {
  switch (a) {
    case Act::identity:
      for (int64_t i = 0; i < n; ++i) y[i] = x[i];
      return;
    case Act::relu:
      for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0.f ? x[i] : 0.f;
      return;
    case Act::tanh:
      for (int64_t i = 0; i < n; ++i) y[i] = std::tanh(x[i]);
      return;
    case Act::silu:
      for (int64_t i = 0; i < n; ++i) y[i] = x[i] * sigmoid(x[i]);
      return;
  }
}

void activate_backward(Act a, const float* x, const float* dy, float* dx, int64_t n) {
  switch (a) {
    case Act::identity:
      for (int64_t i = 0; i < n; ++i) dx[i] = dy[i];
      return;
    case Act::relu:
      for (int64_t i = 0; i < n; ++i) dx[i] = x[i] > 0.f ? dy[i] : 0.f;
      return;
    case Act::tanh:
      for (int64_t i = 0; i < n; ++i) {
        const float t = std::tanh(x[i]);
        dx[i] = dy[i] * (1.f - t * t);
      }
      return;
    case Act::silu:
      for (int64_t i = 0; i < n; ++i) {
        const float s = sigmoid(x[i]);
        dx[i] = dy[i] * s * (1.f + x[i] * (1.f - s));
      }
      return;
  }
}

Mlp::Mlp(MlpSpec s) : spec_(std::move(s)) {
  TEMPER_CHECK(spec_.sizes.size() >= 2) << "an MLP needs an input and an output size, got " << spec_.sizes.size()
                                        << " size(s)";
  offsets_.push_back(0);
  for (size_t l = 0; l + 1 < spec_.sizes.size(); ++l) {
    TEMPER_CHECK(spec_.sizes[l] >= 1 && spec_.sizes[l + 1] >= 1)
        << "MLP layer " << l << ": sizes must be >= 1, got " << spec_.sizes[l] << " -> " << spec_.sizes[l + 1];
    offsets_.push_back(offsets_.back() + spec_.sizes[l] * spec_.sizes[l + 1] + spec_.sizes[l + 1]);
  }
}

void Mlp::init(float* p, uint64_t seed) const {
  for (int64_t l = 0; l < layers(); ++l) {
    const float bound = 1.f / std::sqrt(static_cast<float>(spec_.sizes[l]));
    const int64_t nout = spec_.sizes[l + 1];
    rng_fill_uniform(seed, 2 * l, std::span<float>(p + offsets_[l], w_size(l)), -bound, bound);
    rng_fill_uniform(seed, 2 * l + 1, std::span<float>(p + offsets_[l] + w_size(l), nout), -bound, bound);
  }
}

std::vector<std::pair<std::string, std::vector<int64_t>>> Mlp::param_shapes(const std::string& prefix) const {
  std::vector<std::pair<std::string, std::vector<int64_t>>> out;
  for (int64_t l = 0; l < layers(); ++l) {
    const std::string name = prefix + "." + std::to_string(l);
    out.push_back({name + ".weight", {spec_.sizes[l + 1], spec_.sizes[l]}});
    out.push_back({name + ".bias", {spec_.sizes[l + 1]}});
  }
  return out;
}

void Mlp::forward(const float* p, const float* x, int64_t B, float* y, Tape* tape) const {
  if (tape) {
    tape->rows = B;
    tape->inputs.resize(layers());
    tape->pre.resize(layers());
  }
  std::vector<float> cur(x, x + B * in()), pre, next;
  for (int64_t l = 0; l < layers(); ++l) {
    const int64_t nin = spec_.sizes[l], nout = spec_.sizes[l + 1];
    pre.resize(B * nout);
    const float* b = bias(p, l);
    for (int64_t r = 0; r < B; ++r)
      for (int64_t j = 0; j < nout; ++j) pre[r * nout + j] = b[j];
    kernels::gemm(false, true, B, nout, nin, cur.data(), nin, weight(p, l), nin, 1.f, pre.data(), nout);
    next.resize(B * nout);
    activate(act(l), pre.data(), next.data(), B * nout);
    if (tape) {
      tape->inputs[l] = std::move(cur);
      tape->pre[l] = pre;
    }
    cur = std::move(next);
    next = {};
  }
  std::copy(cur.begin(), cur.end(), y);
}

void Mlp::backward(const float* p, const Tape& tape, const float* dy, float* grad, float* dx) const {
  TEMPER_CHECK(static_cast<int64_t>(tape.pre.size()) == layers()) << "Mlp::backward without a forward's tape";
  const int64_t B = tape.rows;
  std::vector<float> d(dy, dy + B * out()), dpre;
  for (int64_t l = layers() - 1; l >= 0; --l) {
    const int64_t nin = spec_.sizes[l], nout = spec_.sizes[l + 1];
    dpre.resize(B * nout);
    activate_backward(act(l), tape.pre[l].data(), d.data(), dpre.data(), B * nout);
    float* gw = grad + offsets_[l];
    float* gb = gw + w_size(l);
    kernels::gemm(true, false, nout, nin, B, dpre.data(), nout, tape.inputs[l].data(), nin, 1.f, gw, nin);
    for (int64_t r = 0; r < B; ++r)
      for (int64_t j = 0; j < nout; ++j) gb[j] += dpre[r * nout + j];
    if (l == 0 && !dx) break;
    d.assign(B * nin, 0.f);
    kernels::gemm(false, false, B, nin, nout, dpre.data(), nout, weight(p, l), nin, 0.f, d.data(), nin);
  }
  if (dx) std::copy(d.begin(), d.end(), dx);
}

double AdamW::update(float* p, float* g, float lr, double max_grad_norm) {
  const int64_t n = static_cast<int64_t>(m.size());
  const double norm = kernels::clip_grad_norm(g, n, max_grad_norm);
  ++step;
  kernels::adamw_step(p, g, m.data(), v.data(), n, cfg, lr, step);
  return norm;
}

}  // namespace temper::nn
