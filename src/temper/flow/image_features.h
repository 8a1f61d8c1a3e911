// The frozen image feature network for FD / MMD / precision-recall and the DG-RL discriminator on the
// procedural images (issue 38: "a small feature network trained once on the dataset, deterministic,
// frozen"; the stand-in for FID's Inception or the paper's DINO features). Default: a small CNN (3x3
// convolutions with ReLU, each followed by 2x2 average pooling; image_conv.h), then dense layers to the
// features (ReLU inside, tanh on the features) and a linear classifier head; or (arch = mlp) the dense layers
// on the pixels alone. Trained with cross-entropy on the dataset's labels by AdamW when constructed: no file to
// download, the same parameters for the same (data config, config) on any thread count. Features are the
// trunk's output. With `cache` set the trained parameters are kept in that directory under their settings and read
// back by the next start with the same settings (the same bits as training again). Leaves out: augmentation, batch
// norm.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "temper/core/settings.h"
#include "temper/flow/features.h"
#include "temper/flow/image_conv.h"
#include "temper/flow/image_data.h"
#include "temper/nn/mlp.h"

namespace temper::flow {

enum class FeatureArch { cnn, mlp };
inline constexpr EnumNames<FeatureArch, 2> kFeatureArchNames{{{FeatureArch::cnn, "cnn"}, {FeatureArch::mlp, "mlp"}}};

struct ImageFeaturesConfig {
  FeatureArch arch = FeatureArch::cnn;
  std::vector<int64_t> conv{16, 32};  // cnn: output channels of each 3x3 convolution (each halves the image side)
  std::vector<int64_t> hidden{128};   // dense widths between the flattened input and the features
  int64_t dim = 64;                   // feature width
  int64_t train_images = 20000;       // drawn once from the data (seed)
  int64_t steps = 1500;               // AdamW steps on batches drawn with replacement
  int64_t batch = 128;
  double lr = 2e-3;
  double weight_decay = 1e-4;
  uint64_t seed = 7;  // data, init and batches
  std::string cache;  // a directory keeping trained networks by their settings (empty: train at every start)
  void validate(int64_t image) const;
};

struct ImageFeaturesReport {
  double final_loss = 0;        // mean cross-entropy of the last 50 steps
  double heldout_accuracy = 0;  // on 2000 fresh images (seed + 1)
};

class ImageFeatures final : public Features {
 public:
  ImageFeatures(const ImageData& data, ImageFeaturesConfig cfg = {});  // trains
  std::string name() const override { return cfg_.arch == FeatureArch::cnn ? "image_cnn" : "image_mlp"; }
  int64_t in_dim() const override { return C_ * S_ * S_; }
  int64_t dim() const override { return trunk_.out(); }
  void embed(const float* x, int64_t B, float* out) const override;
  void logits(const float* x, int64_t B, float* out) const;  // [B, classes]
  double accuracy(const float* x, const int32_t* y, int64_t n) const;
  const ImageFeaturesReport& report() const { return report_; }
  std::span<const float> params() const { return params_; }  // convolutions, trunk, head

  // What the backward needs: each convolution's input columns and pre-activation, the dense layers' tapes.
  struct Tape {
    std::vector<std::vector<float>> cols, pre;
    nn::Mlp::Tape trunk, head;
  };

 private:
  void train(const ImageData& data);
  // The settings that decide the trained parameters (the data's and the network's), as one line.
  std::string cache_key(const ImageData& data) const;
  bool cache_load(const std::string& path, const std::string& key);  // false: absent or another key
  void cache_save(const std::string& path, const std::string& key) const;
  // features [B, dim] (tape: for a training step); flat: the convolutions' flattened output
  void forward(const float* p, const float* x, int64_t B, float* features, Tape* tape) const;
  void backward(const float* p, const Tape& tape, int64_t B, const float* dfeatures, float* grad) const;
  int64_t conv_params() const;

  ImageFeaturesConfig cfg_;
  int64_t C_ = 0, S_ = 0;
  std::vector<Conv3x3> convs_;
  nn::Mlp trunk_, head_;
  std::vector<float> params_;
  ImageFeaturesReport report_;
};

}  // namespace temper::flow
