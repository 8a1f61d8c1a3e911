#include "temper/rl/discriminator.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "temper/core/error.h"

namespace temper::rl {

void DiscriminatorConfig::visit(KeyVisitor& v) {
  v("epochs", epochs, "the head's full-batch gradient steps per fit");
  v("lr", lr, "the head's learning rate");
  v("l2", l2, "the head's L2 penalty");
  v("clip", clip, "bound on the head's logit");
}

void DiscriminatorConfig::validate() const {
  TEMPER_CHECK(epochs > 0 && lr > 0 && l2 >= 0 && clip > 0)
      << "discriminator: epochs, lr and clip must be > 0 and l2 >= 0, got " << epochs << ", " << lr << ", " << clip << ", " << l2;
}

Discriminator::Discriminator(DiscriminatorConfig cfg) : cfg_(cfg) { cfg_.validate(); }

void Discriminator::fit(const std::vector<std::vector<float>>& real, const std::vector<std::vector<float>>& gen) {
  TEMPER_CHECK(!real.empty() && !gen.empty()) << "discriminator: needs real and generated examples, got " << real.size() << " and " << gen.size();
  const size_t d = real[0].size();
  for (const auto* set : {&real, &gen})
    for (const auto& x : *set) TEMPER_CHECK(x.size() == d) << "discriminator: feature rows of different sizes (" << x.size() << " vs " << d << ")";
  // Standardise with the class-balanced mean and spread.
  mean_.assign(d, 0.0);
  std::vector<double> sq(d, 0.0);
  for (const auto* set : {&real, &gen})
    for (const auto& x : *set)
      for (size_t j = 0; j < d; ++j) {
        const double wgt = 0.5 / static_cast<double>(set->size());
        mean_[j] += wgt * x[j];
        sq[j] += wgt * static_cast<double>(x[j]) * x[j];
      }
  inv_sd_.assign(d, 1.0);
  for (size_t j = 0; j < d; ++j) inv_sd_[j] = 1.0 / std::sqrt(std::max(sq[j] - mean_[j] * mean_[j], 1e-12));
  w_.assign(d, 0.0);
  b_ = 0;
  std::vector<double> z(d), gw(d);
  for (int64_t e = 0; e < cfg_.epochs; ++e) {
    std::fill(gw.begin(), gw.end(), 0.0);
    double gb = 0;
    for (int label : {1, 0}) {
      const auto& set = label ? real : gen;
      const double wgt = 0.5 / static_cast<double>(set.size());  // each class half of the loss
      for (const auto& x : set) {
        double s = b_;
        for (size_t j = 0; j < d; ++j) z[j] = (x[j] - mean_[j]) * inv_sd_[j], s += w_[j] * z[j];
        const double p = 1.0 / (1.0 + std::exp(-s));
        const double g = wgt * (p - label);  // d loss / d s
        for (size_t j = 0; j < d; ++j) gw[j] += g * z[j];
        gb += g;
      }
    }
    for (size_t j = 0; j < d; ++j) w_[j] -= cfg_.lr * (gw[j] + cfg_.l2 * w_[j]);
    b_ -= cfg_.lr * gb;
  }
}

double Discriminator::logit(const std::vector<float>& x) const {
  TEMPER_CHECK(fitted()) << "discriminator: not fitted";
  TEMPER_CHECK(x.size() == w_.size()) << "discriminator: " << x.size() << " features, fitted on " << w_.size();
  double s = b_;
  for (size_t j = 0; j < w_.size(); ++j) s += w_[j] * (x[j] - mean_[j]) * inv_sd_[j];
  return s;
}

double Discriminator::reward(const std::vector<float>& x) const { return std::clamp(logit(x), -cfg_.clip, cfg_.clip); }

double Discriminator::accuracy(const std::vector<std::vector<float>>& real, const std::vector<std::vector<float>>& gen) const {
  double ok = 0;
  for (const auto& x : real) ok += logit(x) > 0 ? 1 : 0;
  for (const auto& x : gen) ok += logit(x) < 0 ? 1 : 0;
  return ok / static_cast<double>(real.size() + gen.size());
}

std::string Discriminator::save() const {
  std::string out = std::to_string(w_.size());
  char buf[40];
  auto put = [&](double v) {
    std::snprintf(buf, sizeof buf, " %.17g", v);
    out += buf;
  };
  put(b_);
  for (const auto* v : {&mean_, &inv_sd_, &w_})
    for (double x : *v) put(x);
  return out;
}

void Discriminator::load(const std::string& text) {
  std::istringstream in(text);
  size_t d = 0;
  in >> d >> b_;
  for (auto* v : {&mean_, &inv_sd_, &w_}) {
    v->assign(d, 0.0);
    for (double& x : *v) in >> x;
  }
  TEMPER_CHECK(in && d > 0) << "discriminator: a saved head that does not parse";
}

}  // namespace temper::rl
