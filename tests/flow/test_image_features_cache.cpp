// The image feature network's cache (features.cache, src/temper/flow/image_features.h): the first start trains
// and writes one file named by its settings; the next start with the same settings reads it back with the same
// bits as training again (and the same report); other settings get another file; a damaged file is trained over.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <vector>

#include "flow/image_features_config.h"
#include "temper/flow/image_features.h"

using namespace temper::flow;
namespace fs = std::filesystem;

namespace {

std::vector<float> params(const ImageFeatures& f) {
  return {f.params().begin(), f.params().end()};
}

size_t files(const fs::path& dir) {
  size_t n = 0;
  for (const auto& e : fs::directory_iterator(dir)) n += e.path().extension() == ".bin";
  return n;
}

}  // namespace

TEST(ImageFeaturesCache, SecondStartReadsTheSameBitsAndOtherSettingsTrainAgain) {
  const fs::path dir = fs::temp_directory_path() / ("temper-features-cache-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  ImageDataConfig dc;
  dc.image = 8;
  const ImageData data(dc);
  const ImageFeatures trained(data, tiny_features(""));
  const ImageFeatures first(data, tiny_features(dir.string()));
  ASSERT_EQ(files(dir), 1u);
  // The name these settings' file has always had (FNV-1a of its key): a cache written before is still found.
  EXPECT_EQ(fs::directory_iterator(dir)->path().filename(), "image-features-d5f85091054bcef1.bin");
  EXPECT_EQ(params(first), params(trained));
  const ImageFeatures second(data, tiny_features(dir.string()));
  EXPECT_EQ(params(second), params(trained));
  EXPECT_EQ(second.report().heldout_accuracy, trained.report().heldout_accuracy);
  EXPECT_EQ(second.report().final_loss, trained.report().final_loss);

  // The read is what makes the second start equal: a file with other values is read back as they are.
  const fs::path file = fs::directory_iterator(dir)->path();
  std::string bytes;
  {
    std::ifstream f(file, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(f), {});
  }
  const size_t body = bytes.find('\n') + 1;
  std::string edited = bytes;
  edited[body] = static_cast<char>(edited[body] ^ 0x40);  // the first parameter's lowest byte
  std::ofstream(file, std::ios::binary) << edited;
  const ImageFeatures read(data, tiny_features(dir.string()));
  EXPECT_NE(params(read)[0], params(trained)[0]);

  // A truncated file is trained over (and rewritten whole).
  std::ofstream(file, std::ios::binary) << bytes.substr(0, bytes.size() - 5);
  const ImageFeatures retrained(data, tiny_features(dir.string()));
  EXPECT_EQ(params(retrained), params(trained));
  EXPECT_EQ(fs::file_size(file), bytes.size());

  // Other settings: another file, other parameters.
  ImageFeaturesConfig other = tiny_features(dir.string());
  other.steps = 21;
  const ImageFeatures longer(data, other);
  EXPECT_EQ(files(dir), 2u);
  EXPECT_NE(params(longer), params(trained));
  fs::remove_all(dir);
}
