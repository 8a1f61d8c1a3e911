// The frozen image feature network for FD / MMD / precision-recall and the DG-RL discriminator on the
// procedural images (issue 38: "a small feature network trained once on the dataset, deterministic,
// frozen"; the stand-in for FID's Inception or the paper's DINO features). An MLP on the pixels (trunk
// C*S*S -> hidden... -> dim, ReLU inside, tanh on the features) with a linear classifier head, trained
// with cross-entropy on the dataset's labels by AdamW when constructed: no file to download, the same
// parameters for the same (data config, config) on any thread count. Features are the trunk's output.
// Leaves out: convolutions, augmentation.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "temper/flow/features.h"
#include "temper/flow/image_data.h"
#include "temper/nn/mlp.h"

namespace temper::flow {

struct ImageFeaturesConfig {
  std::vector<int64_t> hidden{256, 128};  // the trunk's hidden widths
  int64_t dim = 64;                       // feature width
  int64_t train_images = 20000;           // drawn once from the data (seed)
  int64_t steps = 1500;                   // AdamW steps on batches drawn with replacement
  int64_t batch = 128;
  double lr = 1e-3;
  double weight_decay = 1e-4;
  uint64_t seed = 7;  // data, init and batches
  void validate() const;
};

struct ImageFeaturesReport {
  double final_loss = 0;        // mean cross-entropy of the last 50 steps
  double heldout_accuracy = 0;  // on 2000 fresh images (seed + 1)
};

class ImageFeatures final : public Features {
 public:
  ImageFeatures(const ImageData& data, ImageFeaturesConfig cfg = {});  // trains
  std::string name() const override { return "image_mlp"; }
  int64_t in_dim() const override { return trunk_.in(); }
  int64_t dim() const override { return trunk_.out(); }
  void embed(const float* x, int64_t B, float* out) const override;
  void logits(const float* x, int64_t B, float* out) const;  // [B, classes]
  double accuracy(const float* x, const int32_t* y, int64_t n) const;
  const ImageFeaturesReport& report() const { return report_; }
  std::span<const float> params() const { return params_; }  // trunk then head

 private:
  void train(const ImageData& data);
  ImageFeaturesConfig cfg_;
  nn::Mlp trunk_, head_;
  std::vector<float> params_;
  ImageFeaturesReport report_;
};

}  // namespace temper::flow
