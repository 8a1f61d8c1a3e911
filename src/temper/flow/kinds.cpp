#include "temper/flow/kinds.h"

#include <algorithm>

#include "temper/core/error.h"
#include "temper/flow/dit.h"
#include "temper/flow/fourier_features.h"
#include "temper/flow/image_data.h"
#include "temper/flow/image_features.h"
#include "temper/flow/mlp_flow.h"

namespace temper::flow {

namespace {

class Mlp2dKind final : public ModelKind {
 public:
  void visit(KeyVisitor& v) override { cfg_.visit(v); }
  std::unique_ptr<VelocityModel> make(const DataSource& data) const override {
    MlpFlowConfig c = cfg_;
    c.dim = data.dim(), c.classes = data.classes();
    return std::make_unique<MlpFlow>(c);
  }

 private:
  MlpFlowConfig cfg_;
};

class Toy2dKind final : public DataKind {
 public:
  explicit Toy2dKind(std::string kind) { cfg_.kind = std::move(kind); }
  void visit(KeyVisitor& v) override { cfg_.visit(v); }
  void visit_features(KeyVisitor& v) override {
    v("dim", ff_.dim, "random Fourier features (the frozen embedding of 2-D samples)");
    v("lengthscale", ff_.lengthscale, "the RBF lengthscale the features approximate");
    int64_t seed = static_cast<int64_t>(ff_.seed);
    v("seed", seed, "the features' draw");
    ff_.seed = static_cast<uint64_t>(seed);
  }
  std::unique_ptr<DataSource> make() const override { return std::make_unique<Toy2dSource>(cfg_); }
  std::unique_ptr<Features> features(const DataSource& data) const override {
    FourierFeaturesConfig c = ff_;
    c.in_dim = data.dim();
    return std::make_unique<FourierFeatures>(c);
  }

 private:
  Toy2dConfig cfg_;
  FourierFeaturesConfig ff_;
};

// Forwards every key but `skip` (keys another section decides: the DiT's image shape and classes come from [data]).
class SkipKeys final : public KeyVisitor {
 public:
  SkipKeys(KeyVisitor& inner, std::vector<std::string> skip) : in_(inner), skip_(std::move(skip)) {}
  void value(std::string_view k, int64_t& f, std::string_view d) override {
    if (!skipped(k)) in_.value(k, f, d);
  }
  void value(std::string_view k, double& f, std::string_view d) override {
    if (!skipped(k)) in_.value(k, f, d);
  }
  void value(std::string_view k, float& f, std::string_view d) override {
    if (!skipped(k)) in_.value(k, f, d);
  }
  void value(std::string_view k, bool& f, std::string_view d) override {
    if (!skipped(k)) in_.value(k, f, d);
  }
  void value(std::string_view k, std::string& f, std::string_view d) override {
    if (!skipped(k)) in_.value(k, f, d);
  }
  void value(std::string_view k, std::vector<int64_t>& f, std::string_view d) override {
    if (!skipped(k)) in_.value(k, f, d);
  }
  void strings(std::string_view k, std::vector<std::string>& f, std::string_view d) override {
    if (!skipped(k)) in_.strings(k, f, d);
  }
  void choice(std::string_view k, std::string& f, std::string_view d, const std::vector<std::string>& c) override {
    if (!skipped(k)) in_.choice(k, f, d, c);
  }

 private:
  bool skipped(std::string_view k) const { return std::find(skip_.begin(), skip_.end(), k) != skip_.end(); }
  KeyVisitor& in_;
  std::vector<std::string> skip_;
};

class DitKind final : public ModelKind {
 public:
  void visit(KeyVisitor& v) override {
    SkipKeys s(v, {"image", "channels", "classes"});
    cfg_.visit(s);
  }
  std::unique_ptr<VelocityModel> make(const DataSource& data) const override {
    const std::vector<int64_t> shape = data.image_shape();
    TEMPER_CHECK(shape.size() == 3) << "model.kind = \"dit\": the data must be images (data.kind \"shapes\" or "
                                       "\"digits\"), got '"
                                    << data.name() << "'";
    DitConfig c = cfg_;
    c.channels = shape[0], c.image = shape[1], c.classes = data.classes();
    return std::make_unique<Dit>(c);
  }

 private:
  DitConfig cfg_;
};

class ImageSource final : public DataSource {
 public:
  explicit ImageSource(ImageDataConfig c) : data_(c) {}
  std::string name() const override {
    return std::string("images/") + std::string(enum_name(kImageKindNames, data_.config().kind));
  }
  int64_t dim() const override { return data_.dim(); }
  int64_t classes() const override { return data_.classes(); }
  void sample(int64_t n, uint64_t seed, std::vector<float>& x, std::vector<int32_t>& y) const override {
    data_.sample(n, seed, x, y);
  }
  std::vector<int32_t> labels(int64_t n, uint64_t seed) const override { return data_.labels(n, seed); }
  std::vector<int64_t> image_shape() const override {
    return {data_.config().channels, data_.config().image, data_.config().image};
  }
  const ImageData& images() const { return data_; }

 private:
  ImageData data_;
};

class ImagesKind final : public DataKind {
 public:
  explicit ImagesKind(ImageKind kind) { cfg_.kind = kind; }
  void visit(KeyVisitor& v) override {
    SkipKeys s(v, {"kind"});
    cfg_.visit(s);
  }
  void visit_features(KeyVisitor& v) override {
    v("arch", ff_.arch, "the image network: cnn (3x3 convolutions, pooling, dense) or mlp", kFeatureArchNames);
    v("conv", ff_.conv, "cnn: output channels of each convolution");
    v("dim", ff_.dim, "the image network's feature width");
    v("hidden", ff_.hidden, "the image network's dense widths");
    v("train_images", ff_.train_images, "images the network is trained on (once, at start)");
    v("steps", ff_.steps, "the network's training steps");
    int64_t seed = static_cast<int64_t>(ff_.seed);
    v("seed", seed, "the network's draws");
    ff_.seed = static_cast<uint64_t>(seed);
    v("cache", ff_.cache, "a directory keeping the trained network by its settings (empty: train it at every start)");
  }
  std::unique_ptr<DataSource> make() const override { return std::make_unique<ImageSource>(cfg_); }
  std::unique_ptr<Features> features(const DataSource& data) const override {
    const auto* images = dynamic_cast<const ImageSource*>(&data);
    TEMPER_CHECK(images) << "features: the image network needs image data, got '" << data.name() << "'";
    return std::make_unique<ImageFeatures>(images->images(), ff_);
  }

 private:
  ImageDataConfig cfg_;
  ImageFeaturesConfig ff_;
};

}  // namespace

// The table of kinds.
std::vector<std::string> model_kinds() {
  return {"mlp2d", "dit"};
}
std::vector<std::string> data_kinds() {
  return {"gaussians", "rings", "spirals", "shapes", "digits"};
}

std::unique_ptr<ModelKind> make_model_kind(const std::string& kind) {
  if (kind == "mlp2d") return std::make_unique<Mlp2dKind>();
  if (kind == "dit") return std::make_unique<DitKind>();
  TEMPER_FAIL() << "model.kind: expected one of " << join_words(model_kinds(), ", ") << ", got '" << kind << "'";
}

std::unique_ptr<DataKind> make_data_kind(const std::string& kind) {
  if (kind == "gaussians" || kind == "rings" || kind == "spirals") return std::make_unique<Toy2dKind>(kind);
  if (kind == "shapes") return std::make_unique<ImagesKind>(ImageKind::shapes);
  if (kind == "digits") return std::make_unique<ImagesKind>(ImageKind::digits);
  TEMPER_FAIL() << "data.kind: expected one of " << join_words(data_kinds(), ", ") << ", got '" << kind << "'";
}

}  // namespace temper::flow
