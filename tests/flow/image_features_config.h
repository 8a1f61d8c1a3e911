// Small image feature networks for the tests (test_image_features.cpp, test_image_features_cache.cpp): one
// convolution, no dense layer between it and the features.
#pragma once

#include <string>

#include "temper/flow/image_features.h"

namespace temper::flow {

// The learning tests': tells the shapes' classes apart well above chance in 200 steps.
inline ImageFeaturesConfig small_features(FeatureArch arch) {
  ImageFeaturesConfig c;
  c.arch = arch;
  c.conv = {8};
  c.hidden = {};
  c.dim = 32;
  c.train_images = 1500;
  c.steps = 200;
  c.batch = 32;
  c.lr = 3e-3;
  return c;
}

// The cache test's: smaller and shorter (what is stored matters there, not what is learned), the default lr,
// features.cache = cache. These settings name the cache file, a name the cache test pins.
inline ImageFeaturesConfig tiny_features(const std::string& cache) {
  ImageFeaturesConfig c = small_features(FeatureArch::cnn);
  c.conv = {4};
  c.dim = 8;
  c.train_images = 200;
  c.steps = 20;
  c.batch = 16;
  c.lr = ImageFeaturesConfig{}.lr;
  c.cache = cache;
  return c;
}

}  // namespace temper::flow
