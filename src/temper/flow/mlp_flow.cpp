#include "temper/flow/mlp_flow.h"

#include <cmath>

#include "temper/core/error.h"
#include "temper/core/rng.h"

namespace temper::flow {

void MlpFlowConfig::visit(KeyVisitor& v) {
  v("hidden", hidden, "width of each hidden layer");
  v("depth", depth, "hidden layers");
  v("time_freqs", time_freqs, "sinusoid pairs of the time embedding");
  v("class_dim", class_dim, "width of the class embedding");
  v.choice("act", act, "the hidden layers' activation", {"relu", "tanh", "silu"});
}

void MlpFlowConfig::validate() const {
  TEMPER_CHECK(dim >= 1 && classes >= 1) << "model (mlp2d): dim and classes must be >= 1 (got " << dim << ", "
                                         << classes << ")";
  TEMPER_CHECK(hidden >= 1 && depth >= 1)
      << "model.hidden and model.depth: expected >= 1, got " << hidden << " and " << depth;
  TEMPER_CHECK(time_freqs >= 2 && class_dim >= 1)
      << "model.time_freqs: expected >= 2 and model.class_dim >= 1, got " << time_freqs << " and " << class_dim;
  TEMPER_CHECK(enum_from_name(nn::kActNames, act) && act != "identity")
      << "model.act: expected \"relu\", \"tanh\" or \"silu\", got '" << act << "'";
}

namespace {
nn::MlpSpec mlp_spec(const MlpFlowConfig& c) {
  c.validate();
  nn::MlpSpec s;
  s.sizes.push_back(c.in());
  for (int64_t l = 0; l < c.depth; ++l) s.sizes.push_back(c.hidden);
  s.sizes.push_back(c.dim);
  s.hidden = *enum_from_name(nn::kActNames, c.act);
  return s;
}
}  // namespace

MlpFlow::MlpFlow(MlpFlowConfig c)
    : cfg_(c),
      mlp_(mlp_spec(c)),
      params_(static_cast<size_t>(mlp_.param_count() + (c.classes + 1) * c.class_dim), 0.f) {}

void MlpFlow::init_params(uint64_t seed) {
  mlp_.init(params_.data(), seed);
  Rng rng(seed, static_cast<uint64_t>(mlp_.param_count()));  // the table: its own stream after the MLP's
  for (size_t i = static_cast<size_t>(mlp_.param_count()); i < params_.size(); ++i) params_[i] = rng.normal();
}

std::vector<std::pair<std::string, std::vector<int64_t>>> MlpFlow::param_shapes() const {
  auto s = mlp_.param_shapes("net");
  s.emplace_back("class_embed.weight", std::vector<int64_t>{cfg_.classes + 1, cfg_.class_dim});
  return s;
}

void MlpFlow::input_rows(const float* x, const float* t, const int32_t* y, int64_t B, float* rows) const {
  const int64_t in = cfg_.in(), F = cfg_.time_freqs, E = cfg_.class_dim;
  const float* table = params_.data() + mlp_.param_count();
  for (int64_t i = 0; i < B; ++i) {
    float* r = rows + i * in;
    for (int64_t j = 0; j < cfg_.dim; ++j) r[j] = x[i * cfg_.dim + j];
    for (int64_t k = 0; k < F; ++k) {
      const double w = std::pow(1000.0, static_cast<double>(k) / static_cast<double>(F - 1));
      const double a = w * static_cast<double>(t[i]);
      r[cfg_.dim + k] = static_cast<float>(std::cos(a));
      r[cfg_.dim + F + k] = static_cast<float>(std::sin(a));
    }
    TEMPER_CHECK(y[i] >= 0 && y[i] <= cfg_.classes) << "mlp2d flow: label " << y[i] << " outside 0.." << cfg_.classes
                                                    << " (" << cfg_.classes << " is the null label)";
    for (int64_t j = 0; j < E; ++j) r[cfg_.dim + 2 * F + j] = table[y[i] * E + j];
  }
}

void MlpFlow::forward(const float* x, const float* t, const int32_t* y, int64_t B, float* v, bool train) {
  rows_.resize(static_cast<size_t>(B * cfg_.in()));
  input_rows(x, t, y, B, rows_.data());
  if (train) {
    tape_y_.assign(y, y + B);
    mlp_.forward(params_.data(), rows_.data(), B, v, &tape_);
  } else {
    mlp_.forward(params_.data(), rows_.data(), B, v, nullptr);
  }
}

void MlpFlow::backward(const float* dv, float* grad) {
  const auto B = static_cast<int64_t>(tape_y_.size());
  TEMPER_CHECK(B > 0 && tape_.rows == B) << "mlp2d flow: backward without a training forward";
  const int64_t in = cfg_.in(), E = cfg_.class_dim, off = cfg_.dim + 2 * cfg_.time_freqs;
  dx_.resize(static_cast<size_t>(B * in));
  mlp_.backward(params_.data(), tape_, dv, grad, dx_.data());
  float* gtable = grad + mlp_.param_count();
  for (int64_t i = 0; i < B; ++i)
    for (int64_t j = 0; j < E; ++j) gtable[tape_y_[static_cast<size_t>(i)] * E + j] += dx_[i * in + off + j];
}

}  // namespace temper::flow
