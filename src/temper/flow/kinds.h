// What a flow recipe names by kind: [model] kind = "mlp2d" | "dit" (the velocity model), [data] kind =
// "gaussians" | "rings" | "spirals" (2-D, toy2d.h) | "shapes" (images) (the training data) with its frozen [features]
// (Fourier features for 2-D data, the image network for images). Each kind reads its own keys through visit(); make*()
// builds from them. The table of kinds is kinds.cpp: a new model or data set is one entry there.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "temper/core/settings.h"
#include "temper/flow/data_source.h"
#include "temper/flow/features.h"
#include "temper/flow/velocity_model.h"

namespace temper::flow {

class ModelKind {
 public:
  virtual ~ModelKind() = default;
  virtual void visit(KeyVisitor& v) = 0;  // the [model] keys besides kind
  // The model for `data` (its dim, classes and, for images, shape); throws naming the key that does not fit.
  virtual std::unique_ptr<VelocityModel> make(const DataSource& data) const = 0;
};

class DataKind {
 public:
  virtual ~DataKind() = default;
  virtual void visit(KeyVisitor& v) = 0;           // the [data] keys besides kind
  virtual void visit_features(KeyVisitor& v) = 0;  // the [features] keys
  virtual std::unique_ptr<DataSource> make() const = 0;
  // The frozen feature map for this data (deterministic: built or trained from the keys and the seed alone).
  virtual std::unique_ptr<Features> features(const DataSource& data) const = 0;
};

std::vector<std::string> model_kinds();
std::vector<std::string> data_kinds();
std::unique_ptr<ModelKind> make_model_kind(const std::string& kind);  // throws naming the kinds there are
std::unique_ptr<DataKind> make_data_kind(const std::string& kind);

}  // namespace temper::flow
