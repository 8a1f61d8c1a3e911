// What every `temper flow` command reads from a recipe and builds: [data] (kind and keys), [features] (the frozen
// embedding), [model] (kind and keys), built into a data source, a feature map and a velocity model
// (flow/kinds.h); the model's parameters as named checkpoint tensors ("model.<name>", MlpFlow / Dit
// param_shapes) and back; a run's newest checkpoint read for another command (rl's base, sample, eval); the
// samples drawn as a PNG (2-D: a scatter over the true density; images: a grid, one row per class).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "temper/app/recipe.h"
#include "temper/app/side_run.h"
#include "temper/flow/kinds.h"

namespace temper::app {

struct FlowSetup {
  std::string data_kind = "gaussians", model_kind = "mlp2d";
  std::unique_ptr<flow::DataKind> data;
  std::unique_ptr<flow::ModelKind> model;
  void read(Recipe& r);  // [data], [features], [model]
};

struct FlowParts {
  std::unique_ptr<flow::DataSource> data;
  std::unique_ptr<flow::Features> features;
  std::unique_ptr<flow::VelocityModel> model;
};
FlowParts build_flow(const FlowSetup& s);
std::unique_ptr<flow::VelocityModel> make_model(const FlowSetup& s, const flow::DataSource& data);

// "model.<name>" tensors of m (param_shapes order) and back (throws naming the tensor that is missing or misfits).
std::vector<std::pair<std::string, std::vector<float>>> model_tensors(const flow::VelocityModel& m,
                                                                      const std::string& prefix = "model.");
void load_model_tensors(flow::VelocityModel& m, const SideCheckpoint& c, const std::string& prefix = "model.");

// Samples x [n, dim] with labels as a PNG at `path`: a scatter (2-D data) or an image grid (one row per class).
void write_samples_png(const flow::DataSource& data, const std::vector<float>& x, const std::vector<int32_t>& y,
                       const std::string& path);

}  // namespace temper::app
