#include "temper/flow/toy2d.h"

#include <cmath>
#include <numbers>

#include "temper/core/error.h"
#include "temper/core/rng.h"

namespace temper::flow {

namespace {
constexpr int64_t kSpiralChain = 32;  // Gaussians per spiral arm
constexpr double kPi = std::numbers::pi;
}  // namespace

void Toy2dConfig::visit(KeyVisitor& v) {
  v("modes", modes, "Gaussians on the circle, rings, or spiral arms");
  v("classes", classes, "labels: mode index mod classes (1: unconditional)");
  v("radius", radius, "circle radius, outer ring radius, or spiral length");
  v("std", std, "each component's spread");
  v("weights", weights, "the modes' weights, comma-separated (empty: equal)");
}

void Toy2dConfig::validate() const {
  TEMPER_CHECK(kind == "gaussians" || kind == "rings" || kind == "spirals")
      << "data.kind: expected \"gaussians\", \"rings\" or \"spirals\" for 2-D data, got '" << kind << "'";
  TEMPER_CHECK(modes >= 1 && modes <= 1000) << "data.modes: expected 1..1000, got " << modes;
  TEMPER_CHECK(classes >= 1 && classes <= modes)
      << "data.classes: expected 1..modes (" << modes << "), got " << classes;
  TEMPER_CHECK(radius > 0 && std > 0) << "data.radius and data.std: expected > 0, got " << radius << " and " << std;
  if (!weights.empty()) {
    const auto w = split_numbers(weights, "data.weights");
    TEMPER_CHECK(static_cast<int64_t>(w.size()) == modes)
        << "data.weights: expected " << modes << " weights (one per mode), got " << w.size();
    for (double x : w) TEMPER_CHECK(x > 0) << "data.weights: every weight must be > 0, got " << x;
  }
}

Toy2d::Toy2d(Toy2dConfig c) : cfg_(std::move(c)) {
  cfg_.validate();
  std::vector<double> w = cfg_.weights.empty() ? std::vector<double>(static_cast<size_t>(cfg_.modes), 1.0)
                                               : split_numbers(cfg_.weights, "data.weights");
  double total = 0;
  for (double x : w) total += x;
  for (int64_t k = 0; k < cfg_.modes; ++k) {
    const double wk = w[static_cast<size_t>(k)] / total;
    const auto label = static_cast<int32_t>(k % cfg_.classes);
    const double angle = 2 * kPi * static_cast<double>(k) / static_cast<double>(cfg_.modes);
    if (cfg_.kind == "gaussians") {
      comps_.push_back({false, cfg_.radius * std::cos(angle), cfg_.radius * std::sin(angle), 0, cfg_.std, wk, label});
    } else if (cfg_.kind == "rings") {
      const double r = cfg_.radius * static_cast<double>(k + 1) / static_cast<double>(cfg_.modes);
      comps_.push_back({true, 0, 0, r, cfg_.std, wk, label});
    } else {
      for (int64_t j = 0; j < kSpiralChain; ++j) {
        const double u = 0.15 + 0.85 * static_cast<double>(j) / static_cast<double>(kSpiralChain - 1);
        const double a = 3 * kPi * u + angle, r = cfg_.radius * u;
        comps_.push_back(
            {false, r * std::cos(a), r * std::sin(a), 0, cfg_.std, wk / static_cast<double>(kSpiralChain), label});
      }
    }
  }
  class_weight_.assign(static_cast<size_t>(cfg_.classes), 0.0);
  for (const auto& c : comps_) class_weight_[static_cast<size_t>(c.label)] += c.weight;
  for (auto& c : comps_) {
    const double trunc = 0.5 * std::erfc(-c.r / (c.std * std::numbers::sqrt2));  // a ring's Phi(R / s)
    c.log_norm = c.ring ? std::log(c.std * std::sqrt(2 * kPi) * trunc) : std::log(2 * kPi * c.std * c.std);
    c.log_weight = std::log(c.weight);  // x / 1.0 is x: the old log(weight / total) bits
    c.log_weight_in_class = std::log(c.weight / class_weight_[static_cast<size_t>(c.label)]);
  }
}

double Toy2d::class_prob(int32_t y) const {
  TEMPER_CHECK(y >= 0 && y < cfg_.classes) << "toy2d: class " << y << " outside 0.." << cfg_.classes - 1;
  return class_weight_[static_cast<size_t>(y)];
}

int64_t Toy2d::pick(double u, int32_t y) const {
  const double total = y < 0 ? 1.0 : class_weight_[static_cast<size_t>(y)];
  double acc = 0;
  int64_t last = -1;
  for (size_t i = 0; i < comps_.size(); ++i) {
    if (y >= 0 && comps_[i].label != y) continue;
    last = static_cast<int64_t>(i);
    acc += comps_[i].weight / total;
    if (u < acc) return last;
  }
  return last;  // rounding at the top end
}

std::vector<float> Toy2d::sample_class(int64_t n, int32_t y, uint64_t seed) const {
  TEMPER_CHECK(y < cfg_.classes) << "toy2d: class " << y << " outside 0.." << cfg_.classes - 1;
  std::vector<float> x(static_cast<size_t>(2 * n));
  for (int64_t i = 0; i < n; ++i) {
    Rng rng(seed, static_cast<uint64_t>(i));
    const Component& c = comps_[static_cast<size_t>(pick(rng.uniform_f64(), y))];
    double a, b;
    if (c.ring) {
      double r = -1;
      while (r <= 0) r = c.r + c.std * rng.normal();  // truncated at 0
      const double angle = 2 * kPi * rng.uniform_f64();
      a = r * std::cos(angle), b = r * std::sin(angle);
    } else {
      a = c.cx + c.std * rng.normal(), b = c.cy + c.std * rng.normal();
    }
    x[static_cast<size_t>(2 * i)] = static_cast<float>(a);
    x[static_cast<size_t>(2 * i + 1)] = static_cast<float>(b);
  }
  return x;
}

void Toy2d::sample(int64_t n, uint64_t seed, std::vector<float>& x, std::vector<int32_t>& y) const {
  x = sample_class(n, -1, seed);
  y = labels(n, seed);
}

std::vector<int32_t> Toy2d::labels(int64_t n, uint64_t seed) const {
  std::vector<int32_t> y(static_cast<size_t>(n), 0);
  if (cfg_.classes == 1) return y;
  // The label of the component sample i comes from: its stream's first draw picks the component.
  for (int64_t i = 0; i < n; ++i) {
    Rng rng(seed, static_cast<uint64_t>(i));
    y[static_cast<size_t>(i)] = comps_[static_cast<size_t>(pick(rng.uniform_f64(), -1))].label;
  }
  return y;
}

double Toy2d::log_density(double x0, double x1, int32_t y) const {
  TEMPER_CHECK(y < cfg_.classes) << "toy2d: class " << y << " outside 0.." << cfg_.classes - 1;
  double best = -INFINITY;
  thread_local std::vector<double> terms;  // reused: evaluation calls this per sample per class
  terms.clear();
  for (const auto& c : comps_) {
    if (y >= 0 && c.label != y) continue;
    double lp;
    if (c.ring) {
      const double rho = std::max(std::hypot(x0, x1), 1e-300), z = (rho - c.r) / c.std;
      lp = -0.5 * z * z - c.log_norm - std::log(2 * kPi * rho);
    } else {
      const double dx = x0 - c.cx, dy = x1 - c.cy;
      lp = -(dx * dx + dy * dy) / (2 * c.std * c.std) - c.log_norm;
    }
    lp += y < 0 ? c.log_weight : c.log_weight_in_class;
    terms.push_back(lp);
    best = std::max(best, lp);
  }
  double s = 0;
  for (double t : terms) s += std::exp(t - best);
  return best + std::log(s);
}

}  // namespace temper::flow
