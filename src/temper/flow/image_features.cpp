#include "temper/flow/image_features.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "temper/core/atomic_file.h"
#include "temper/core/error.h"
#include "temper/core/fnv1a.h"
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

// The trunk's input width: the pixels (mlp) or the last convolution's pooled output (cnn).
int64_t flat_width(const ImageData& d, const ImageFeaturesConfig& c) {
  if (c.arch == FeatureArch::mlp) return d.dim();
  const int64_t side = d.config().image >> c.conv.size();
  return side * side * c.conv.back();
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

void ImageFeaturesConfig::validate(int64_t image) const {
  TEMPER_CHECK(dim >= 1) << "image features: dim = " << dim << " (expected >= 1)";
  for (int64_t h : hidden) TEMPER_CHECK(h >= 1) << "image features: hidden width " << h << " (expected >= 1)";
  if (arch == FeatureArch::cnn) {
    TEMPER_CHECK(!conv.empty()) << "image features: arch cnn with no convolution (conv: expected channels, e.g. 16,32)";
    for (int64_t c : conv) TEMPER_CHECK(c >= 1) << "image features: conv channels " << c << " (expected >= 1)";
    TEMPER_CHECK(conv.size() < 16 && image % (int64_t{1} << conv.size()) == 0)
        << "image features: image side " << image << " with " << conv.size()
        << " convolutions (each halves the side: expected a multiple of "
        << (int64_t{1} << std::min<size_t>(conv.size(), 15)) << ")";
  }
  TEMPER_CHECK(train_images >= 1 && steps >= 1 && batch >= 1)
      << "image features: train_images " << train_images << ", steps " << steps << ", batch " << batch
      << " (expected >= 1 each)";
  TEMPER_CHECK(lr > 0) << "image features: lr = " << lr << " (expected > 0)";
}

ImageFeatures::ImageFeatures(const ImageData& data, ImageFeaturesConfig cfg)
    : cfg_((cfg.validate(data.config().image), cfg)),
      C_(data.config().channels),
      S_(data.config().image),
      trunk_(trunk_spec(flat_width(data, cfg), cfg)),
      head_(nn::MlpSpec{{cfg.dim, data.classes()}, nn::Act::identity, nn::Act::identity}) {
  if (cfg_.arch == FeatureArch::cnn) {
    int64_t cin = C_;
    for (int64_t c : cfg_.conv) convs_.push_back({cin, c}), cin = c;
  }
  const int64_t cp = conv_params();
  params_.assign(static_cast<size_t>(cp + trunk_.param_count() + head_.param_count()), 0.f);
  int64_t at = 0;
  for (size_t l = 0; l < convs_.size(); ++l) {  // torch's Conv2d default: U(-1/sqrt(fan_in), 1/sqrt(fan_in))
    const float bound = 1.0f / std::sqrt(static_cast<float>(convs_[l].cin * 9));
    rng_fill_uniform(mix_seed(cfg_.seed, 10 + l), 0,
                     std::span<float>(params_.data() + at, static_cast<size_t>(convs_[l].param_count())), -bound,
                     bound);
    at += convs_[l].param_count();
  }
  trunk_.init(params_.data() + cp, mix_seed(cfg_.seed, 1));
  head_.init(params_.data() + cp + trunk_.param_count(), mix_seed(cfg_.seed, 2));
  if (cfg_.cache.empty()) {
    train(data);
    return;
  }
  const std::string key = cache_key(data);
  const uint64_t h = fnv1a(key, kFnv1aShortBasis);  // names the file (as it always has); the file holds the key
  char name[40];
  std::snprintf(name, sizeof(name), "image-features-%016llx.bin", static_cast<unsigned long long>(h));
  const std::string path = (std::filesystem::path(cfg_.cache) / name).string();
  if (cache_load(path, key)) return;
  train(data);
  cache_save(path, key);
}

std::string ImageFeatures::cache_key(const ImageData& data) const {
  const ImageDataConfig& d = data.config();
  std::ostringstream k;
  k.precision(17);
  k << "temper image features v1; data " << enum_name(kImageKindNames, d.kind) << " image " << d.image << " channels "
    << d.channels << " classes " << data.classes() << "; arch " << enum_name(kFeatureArchNames, cfg_.arch) << " conv";
  for (int64_t c : cfg_.conv) k << ' ' << c;
  k << " hidden";
  for (int64_t c : cfg_.hidden) k << ' ' << c;
  k << " dim " << cfg_.dim << " train_images " << cfg_.train_images << " steps " << cfg_.steps << " batch "
    << cfg_.batch << " lr " << cfg_.lr << " weight_decay " << cfg_.weight_decay << " seed " << cfg_.seed << " params "
    << params_.size();
  return k.str();
}

bool ImageFeatures::cache_load(const std::string& path, const std::string& key) {
  std::ifstream f(path, std::ios::binary);
  std::string line;
  if (!f || !std::getline(f, line) || line != key) return false;
  std::vector<float> p(params_.size());
  ImageFeaturesReport r;
  f.read(reinterpret_cast<char*>(p.data()), static_cast<std::streamsize>(p.size() * sizeof(float)));
  f.read(reinterpret_cast<char*>(&r), sizeof(r));
  if (!f || f.peek() != std::char_traits<char>::eof()) return false;  // truncated or longer: train again
  params_ = std::move(p), report_ = r;
  return true;
}

void ImageFeatures::cache_save(const std::string& path, const std::string& key) const {
  std::filesystem::create_directories(cfg_.cache);
  // A concurrent reader sees the old file or the whole new one.
  write_file_atomic(path, [&](const std::string& tmp) {
    std::ofstream f(tmp, std::ios::binary);
    f << key << '\n';
    f.write(reinterpret_cast<const char*>(params_.data()),
            static_cast<std::streamsize>(params_.size() * sizeof(float)));
    f.write(reinterpret_cast<const char*>(&report_), sizeof(report_));
    f.flush();
    TEMPER_CHECK(f.good()) << "image features: cannot write the cache file " << tmp << " (features.cache = '"
                           << cfg_.cache << "': expected a writable directory)";
  });
}

int64_t ImageFeatures::conv_params() const {
  int64_t n = 0;
  for (const Conv3x3& c : convs_) n += c.param_count();
  return n;
}

void ImageFeatures::forward(const float* p, const float* x, int64_t B, float* features, Tape* tape) const {
  std::vector<float> cur(x, x + B * in_dim()), act, cols;
  if (!convs_.empty()) {
    chw_to_nhwc(x, B, C_, S_, S_, cur.data());
    if (tape) tape->cols.resize(convs_.size()), tape->pre.resize(convs_.size());
  }
  int64_t side = S_;
  for (size_t l = 0; l < convs_.size(); ++l) {
    const Conv3x3& cv = convs_[l];
    act.resize(static_cast<size_t>(B * side * side * cv.cout));
    cv.forward(p, cur.data(), B, side, side, cols, act.data());
    p += cv.param_count();
    if (tape) tape->pre[l] = act, tape->cols[l] = cols;
    for (float& v : act) v = v > 0.f ? v : 0.f;
    cur.resize(static_cast<size_t>(B * (side / 2) * (side / 2) * cv.cout));
    avgpool2_fwd(act.data(), B, side, side, cv.cout, cur.data());
    side /= 2;
  }
  trunk_.forward(p, cur.data(), B, features, tape ? &tape->trunk : nullptr);
}

void ImageFeatures::backward(const float* p, const Tape& tape, int64_t B, const float* dfeatures, float* grad) const {
  const int64_t cp = conv_params();
  std::vector<float> d(static_cast<size_t>(B * trunk_.in())), dact;
  trunk_.backward(p + cp, tape.trunk, dfeatures, grad + cp, convs_.empty() ? nullptr : d.data());
  int64_t at = cp, side = S_ >> convs_.size();
  for (size_t l = convs_.size(); l-- > 0;) {
    const Conv3x3& cv = convs_[l];
    at -= cv.param_count();
    side *= 2;
    dact.resize(static_cast<size_t>(B * side * side * cv.cout));
    avgpool2_bwd(d.data(), B, side, side, cv.cout, dact.data());
    for (size_t i = 0; i < dact.size(); ++i) dact[i] = tape.pre[l][i] > 0.f ? dact[i] : 0.f;
    d.resize(static_cast<size_t>(B * side * side * cv.cin));
    cv.backward(p + at, tape.cols[l], dact.data(), B, side, side, grad + at, l > 0 ? d.data() : nullptr);
  }
}

void ImageFeatures::train(const ImageData& data) {
  std::vector<float> xs;
  std::vector<int32_t> ys;
  data.sample(cfg_.train_images, cfg_.seed, xs, ys);
  const int64_t B = cfg_.batch, D = data.dim(), K = data.classes();
  const int64_t body = conv_params() + trunk_.param_count();
  kernels::AdamWConfig ac;
  ac.weight_decay = static_cast<float>(cfg_.weight_decay);
  nn::AdamW opt(static_cast<int64_t>(params_.size()), ac);
  std::vector<float> x(static_cast<size_t>(B * D)), f(static_cast<size_t>(B * cfg_.dim)), z, dz, df(f.size());
  std::vector<float> grad(params_.size());
  std::vector<int32_t> y(static_cast<size_t>(B));
  Tape tape;
  double tail = 0;
  int64_t tail_n = 0;
  for (int64_t step = 0; step < cfg_.steps; ++step) {
    Rng rng(mix_seed(cfg_.seed, 3), static_cast<uint64_t>(step));
    for (int64_t b = 0; b < B; ++b) {
      const int64_t i = rng.next_u32() % static_cast<uint32_t>(cfg_.train_images);
      std::copy_n(xs.begin() + i * D, D, x.begin() + b * D);
      y[b] = ys[i];
    }
    forward(params_.data(), x.data(), B, f.data(), &tape);
    z.resize(static_cast<size_t>(B * K));
    head_.forward(params_.data() + body, f.data(), B, z.data(), &tape.head);
    const double loss = cross_entropy(z, y.data(), B, K, dz);
    if (step >= cfg_.steps - 50) tail += loss, ++tail_n;
    std::fill(grad.begin(), grad.end(), 0.f);
    head_.backward(params_.data() + body, tape.head, dz.data(), grad.data() + body, df.data());
    backward(params_.data(), tape, B, df.data(), grad.data());
    opt.update(params_.data(), grad.data(), static_cast<float>(cfg_.lr), 1.0);
  }
  report_.final_loss = tail / static_cast<double>(tail_n);
  data.sample(2000, cfg_.seed + 1, xs, ys);
  report_.heldout_accuracy = accuracy(xs.data(), ys.data(), 2000);
}

void ImageFeatures::embed(const float* x, int64_t B, float* out) const {
  constexpr int64_t kChunk = 256;  // images per pass: bounds the convolutions' columns (a row's features never
                                   // depend on the other rows, so chunks give the same bits)
  for (int64_t b = 0; b < B; b += kChunk)
    forward(params_.data(), x + b * in_dim(), std::min(kChunk, B - b), out + b * dim(), nullptr);
}

void ImageFeatures::logits(const float* x, int64_t B, float* out) const {
  std::vector<float> f(static_cast<size_t>(B * cfg_.dim));
  embed(x, B, f.data());
  head_.forward(params_.data() + conv_params() + trunk_.param_count(), f.data(), B, out);
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
