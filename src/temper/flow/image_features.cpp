#include "temper/flow/image_features.h"

#include <algorithm>
#include <cmath>

#include "temper/core/error.h"
#include "temper/core/rng.h"

namespace temper::flow {
namespace {

nn::MlpSpec trunk_spec(int64_t in, const ImageFeaturesConfig& c) {
  nn::MlpSpec s;
  s.sizes.push_back(in);
  s.sizes.insert(s.sizes.end(), c.hidden.begin(), c.hidden.end());
  s.sizes.push_back(c.dim);
  s.hidden = nn::Act::relu;
  s.output = nn::Act::tanh;
  return s;
}

// Mean cross-entropy of logits [B, K] against y; dlogits = (softmax - onehot) / B.
double cross_entropy(const std::vector<float>& z, const int32_t* y, int64_t B, int64_t K, std::vector<float>& dz) {
  double loss = 0;
  dz.resize(z.size());
  for (int64_t b = 0; b < B; ++b) {
    const float* row = z.data() + b * K;
    const float m = *std::max_element(row, row + K);
    double sum = 0;
    for (int64_t k = 0; k < K; ++k) sum += std::exp(static_cast<double>(row[k] - m));
    loss += std::log(sum) + m - row[y[b]];
    for (int64_t k = 0; k < K; ++k) {
      const double p = std::exp(static_cast<double>(row[k] - m)) / sum;
      dz[b * K + k] = static_cast<float>((p - (k == y[b] ? 1.0 : 0.0)) / static_cast<double>(B));
    }
  }
  return loss / static_cast<double>(B);
}

}  // namespace

void ImageFeaturesConfig::validate() const {
  TEMPER_CHECK(dim >= 1) << "image features: dim = " << dim << " (expected >= 1)";
  for (int64_t h : hidden) TEMPER_CHECK(h >= 1) << "image features: hidden width " << h << " (expected >= 1)";
  TEMPER_CHECK(train_images >= 1 && steps >= 1 && batch >= 1)
      << "image features: train_images " << train_images << ", steps " << steps << ", batch " << batch
      << " (expected >= 1 each)";
  TEMPER_CHECK(lr > 0) << "image features: lr = " << lr << " (expected > 0)";
}

ImageFeatures::ImageFeatures(const ImageData& data, ImageFeaturesConfig cfg)
    : cfg_((cfg.validate(), cfg)),
      trunk_(trunk_spec(data.dim(), cfg)),
      head_(nn::MlpSpec{{cfg.dim, data.classes()}, nn::Act::identity, nn::Act::identity}) {
  params_.assign(static_cast<size_t>(trunk_.param_count() + head_.param_count()), 0.f);
  trunk_.init(params_.data(), mix_seed(cfg_.seed, 1));
  head_.init(params_.data() + trunk_.param_count(), mix_seed(cfg_.seed, 2));
  train(data);
}

void ImageFeatures::train(const ImageData& data) {
  std::vector<float> xs;
  std::vector<int32_t> ys;
  data.sample(cfg_.train_images, cfg_.seed, xs, ys);
  const int64_t B = cfg_.batch, D = data.dim(), K = data.classes(), P = trunk_.param_count();
  kernels::AdamWConfig ac;
  ac.weight_decay = static_cast<float>(cfg_.weight_decay);
  nn::AdamW opt(static_cast<int64_t>(params_.size()), ac);
  std::vector<float> x(static_cast<size_t>(B * D)), f(static_cast<size_t>(B * cfg_.dim)), z, dz, df(f.size());
  std::vector<float> grad(params_.size());
  std::vector<int32_t> y(static_cast<size_t>(B));
  nn::Mlp::Tape tt, th;
  double tail = 0;
  int64_t tail_n = 0;
  for (int64_t step = 0; step < cfg_.steps; ++step) {
    Rng rng(mix_seed(cfg_.seed, 3), static_cast<uint64_t>(step));
    for (int64_t b = 0; b < B; ++b) {
      const int64_t i = rng.next_u32() % static_cast<uint32_t>(cfg_.train_images);
      std::copy_n(xs.begin() + i * D, D, x.begin() + b * D);
      y[b] = ys[i];
    }
    trunk_.forward(params_.data(), x.data(), B, f.data(), &tt);
    z.resize(static_cast<size_t>(B * K));
    head_.forward(params_.data() + P, f.data(), B, z.data(), &th);
    const double loss = cross_entropy(z, y.data(), B, K, dz);
    if (step >= cfg_.steps - 50) tail += loss, ++tail_n;
    std::fill(grad.begin(), grad.end(), 0.f);
    head_.backward(params_.data() + P, th, dz.data(), grad.data() + P, df.data());
    trunk_.backward(params_.data(), tt, df.data(), grad.data());
    opt.update(params_.data(), grad.data(), static_cast<float>(cfg_.lr), 1.0);
  }
  report_.final_loss = tail / static_cast<double>(tail_n);
  data.sample(2000, cfg_.seed + 1, xs, ys);
  report_.heldout_accuracy = accuracy(xs.data(), ys.data(), 2000);
}

void ImageFeatures::embed(const float* x, int64_t B, float* out) const {
  trunk_.forward(params_.data(), x, B, out);
}

void ImageFeatures::logits(const float* x, int64_t B, float* out) const {
  std::vector<float> f(static_cast<size_t>(B * cfg_.dim));
  embed(x, B, f.data());
  head_.forward(params_.data() + trunk_.param_count(), f.data(), B, out);
}

double ImageFeatures::accuracy(const float* x, const int32_t* y, int64_t n) const {
  const int64_t K = head_.out();
  std::vector<float> z(static_cast<size_t>(n * K));
  logits(x, n, z.data());
  int64_t right = 0;
  for (int64_t i = 0; i < n; ++i) {
    const float* row = z.data() + i * K;
    right += (std::max_element(row, row + K) - row) == y[i];
  }
  return static_cast<double>(right) / static_cast<double>(n);
}

}  // namespace temper::flow
