#include "temper/flow/kinds.h"

#include "temper/core/error.h"
#include "temper/flow/fourier_features.h"
#include "temper/flow/mlp_flow.h"

namespace temper::flow {

namespace {

class Mlp2dKind final : public ModelKind {
 public:
  void visit(KeyVisitor& v) override { cfg_.visit(v); }
  std::unique_ptr<VelocityModel> make(int64_t dim, int64_t classes) const override {
    MlpFlowConfig c = cfg_;
    c.dim = dim, c.classes = classes;
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

}  // namespace

// The table of kinds. The DiT and the procedural images join here ("dit", "shapes").
std::vector<std::string> model_kinds() {
  return {"mlp2d"};
}
std::vector<std::string> data_kinds() {
  return {"gaussians", "rings", "spirals"};
}

std::unique_ptr<ModelKind> make_model_kind(const std::string& kind) {
  if (kind == "mlp2d") return std::make_unique<Mlp2dKind>();
  TEMPER_FAIL() << "model.kind: expected one of " << join_words(model_kinds(), ", ") << ", got '" << kind << "'";
}

std::unique_ptr<DataKind> make_data_kind(const std::string& kind) {
  if (kind == "gaussians" || kind == "rings" || kind == "spirals") return std::make_unique<Toy2dKind>(kind);
  TEMPER_FAIL() << "data.kind: expected one of " << join_words(data_kinds(), ", ") << ", got '" << kind << "'";
}

}  // namespace temper::flow
