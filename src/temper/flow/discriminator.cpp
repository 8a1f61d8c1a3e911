#include "temper/flow/discriminator.h"

#include <algorithm>
#include <cmath>

#include "temper/core/error.h"
#include "temper/flow/linalg.h"

namespace temper::flow {

void DiscConfig::visit(KeyVisitor& v) {
  v("samples", samples, "generated and real samples per class label and fit");
  v("l2", l2, "L2 penalty on the head's weights");
  v("iters", iters, "Newton steps at most per fit");
  v("clip", clip, "bound on the reward (the clipped logit)");
  v("balanced", balanced, "each side half the loss (else: every example alike, plus the prior correction)");
  v("per_class", per_class, "one head per class label (class-conditional generators)");
  v("refit_every", refit_every, "RL steps between refits on the current policy (0: one fit, on the base)");
}

void DiscConfig::validate() const {
  TEMPER_CHECK(samples >= 8) << "rl.discriminator.samples: expected >= 8, got " << samples;
  TEMPER_CHECK(l2 > 0) << "rl.discriminator.l2: expected > 0 (Newton needs it), got " << l2;
  TEMPER_CHECK(iters >= 1) << "rl.discriminator.iters: expected >= 1, got " << iters;
  TEMPER_CHECK(clip > 0) << "rl.discriminator.clip: expected > 0, got " << clip;
  TEMPER_CHECK(refit_every >= 0) << "rl.discriminator.refit_every: expected >= 0, got " << refit_every;
}

Discriminator::Discriminator(DiscConfig c) : cfg_(c) {
  cfg_.validate();
}

int64_t Discriminator::head(int32_t y) const {
  if (heads_ == 1) return 0;
  TEMPER_CHECK(y >= 0 && y < heads_) << "discriminator: label " << y << " outside 0.." << heads_ - 1;
  return y;
}

namespace {
struct HeadData {
  std::vector<float> x;   // standardised rows [n, d] then a 1 (the bias column): [n, d + 1]
  std::vector<double> c;  // 1 real, 0 generated
  std::vector<double> w;  // example weights (sum 1)
};

// Newton's method on sum_i w_i logistic(x_i, c_i) + l2 / 2 |w|^2 (bias free); returns the parameters [d + 1].
std::vector<double> newton_fit(const HeadData& h, int64_t d, double l2, int64_t iters) {
  const int64_t k = d + 1, n = static_cast<int64_t>(h.c.size());
  std::vector<double> beta(static_cast<size_t>(k), 0.0), z(static_cast<size_t>(n));
  auto objective = [&](const std::vector<double>& b) {
    double f = 0;
    for (int64_t i = 0; i < n; ++i) {
      double s = 0;
      for (int64_t j = 0; j < k; ++j) s += b[static_cast<size_t>(j)] * h.x[static_cast<size_t>(i * k + j)];
      z[static_cast<size_t>(i)] = s;
      const double m = h.c[static_cast<size_t>(i)] > 0.5 ? -s : s;  // softplus(-s) for real, softplus(s) for generated
      f += h.w[static_cast<size_t>(i)] * (m > 0 ? m + std::log1p(std::exp(-m)) : std::log1p(std::exp(m)));
    }
    for (int64_t j = 0; j < d; ++j) f += 0.5 * l2 * b[static_cast<size_t>(j)] * b[static_cast<size_t>(j)];
    return f;
  };
  double f = objective(beta);
  for (int64_t it = 0; it < iters; ++it) {
    std::vector<double> g(static_cast<size_t>(k), 0.0), H(static_cast<size_t>(k * k), 0.0);
    for (int64_t i = 0; i < n; ++i) {
      const double p = 1 / (1 + std::exp(-z[static_cast<size_t>(i)])), wi = h.w[static_cast<size_t>(i)];
      const double r = wi * (p - h.c[static_cast<size_t>(i)]), q = wi * p * (1 - p);
      const float* xi = h.x.data() + i * k;
      for (int64_t a = 0; a < k; ++a) {
        g[static_cast<size_t>(a)] += r * xi[a];
        const double qa = q * xi[a];
        for (int64_t b = a; b < k; ++b) H[static_cast<size_t>(a * k + b)] += qa * xi[b];
      }
    }
    for (int64_t a = 0; a < k; ++a) {
      for (int64_t b = 0; b < a; ++b) H[static_cast<size_t>(a * k + b)] = H[static_cast<size_t>(b * k + a)];
      const double pen = a < d ? l2 : 1e-9;
      H[static_cast<size_t>(a * k + a)] += pen;
      if (a < d) g[static_cast<size_t>(a)] += l2 * beta[static_cast<size_t>(a)];
    }
    const std::vector<double> step = cholesky_solve(H, g, k, "discriminator Newton step");
    double t = 1;
    std::vector<double> next(beta.size());
    double fn = f;
    for (int half = 0; half < 30; ++half, t *= 0.5) {
      for (size_t j = 0; j < beta.size(); ++j) next[j] = beta[j] - t * step[j];
      fn = objective(next);
      if (fn <= f) break;
    }
    if (!(fn < f)) {  // no progress: z holds the last trial; restore the current point's logits
      objective(beta);
      break;
    }
    const double gain = f - fn;
    beta = next, f = fn;
    if (gain < 1e-12 * std::max(1.0, std::abs(f))) break;
  }
  return beta;
}
}  // namespace

DiscFitStats Discriminator::fit(const std::vector<float>& real, const std::vector<int32_t>& real_y,
                                const std::vector<float>& gen, const std::vector<int32_t>& gen_y, int64_t dim,
                                int64_t classes) {
  TEMPER_CHECK(dim > 0 && real.size() == real_y.size() * static_cast<size_t>(dim) &&
               gen.size() == gen_y.size() * static_cast<size_t>(dim))
      << "discriminator: " << real.size() << " real and " << gen.size() << " generated values for " << real_y.size()
      << " and " << gen_y.size() << " labelled rows of " << dim;
  dim_ = dim, heads_ = cfg_.per_class ? classes : 1;
  const auto nr = static_cast<int64_t>(real_y.size()), ng = static_cast<int64_t>(gen_y.size());
  mean_.assign(static_cast<size_t>(dim), 0.f), inv_sd_.assign(static_cast<size_t>(dim), 1.f);
  std::vector<double> mean(static_cast<size_t>(dim), 0.0), var(static_cast<size_t>(dim), 0.0);
  for (const auto* set : {&real, &gen})
    for (size_t i = 0; i < set->size(); ++i) mean[i % static_cast<size_t>(dim)] += (*set)[i];
  for (auto& m : mean) m /= static_cast<double>(nr + ng);
  for (const auto* set : {&real, &gen})
    for (size_t i = 0; i < set->size(); ++i) {
      const double c = (*set)[i] - mean[i % static_cast<size_t>(dim)];
      var[i % static_cast<size_t>(dim)] += c * c;
    }
  for (int64_t j = 0; j < dim; ++j) {
    mean_[static_cast<size_t>(j)] = static_cast<float>(mean[static_cast<size_t>(j)]);
    const double sd = std::sqrt(var[static_cast<size_t>(j)] / static_cast<double>(nr + ng));
    inv_sd_[static_cast<size_t>(j)] = sd > 1e-12 ? static_cast<float>(1 / sd) : 1.f;
  }
  w_.assign(static_cast<size_t>(heads_ * (dim + 1)), 0.f);
  DiscFitStats st;
  st.real = nr, st.gen = ng;
  double acc_sum = 0, loss_sum = 0;
  for (int64_t hd = 0; hd < heads_; ++hd) {
    HeadData h;
    int64_t cr = 0, cg = 0;
    for (int side = 0; side < 2; ++side) {
      const auto& x = side == 0 ? real : gen;
      const auto& y = side == 0 ? real_y : gen_y;
      for (size_t i = 0; i < y.size(); ++i) {
        if (heads_ > 1 && y[i] != hd) continue;
        for (int64_t j = 0; j < dim; ++j)
          h.x.push_back((x[i * static_cast<size_t>(dim) + static_cast<size_t>(j)] - mean_[static_cast<size_t>(j)]) *
                        inv_sd_[static_cast<size_t>(j)]);
        h.x.push_back(1.f);
        h.c.push_back(side == 0 ? 1.0 : 0.0);
        (side == 0 ? cr : cg) += 1;
      }
    }
    TEMPER_CHECK(cr > 0 && cg > 0) << "discriminator: head " << hd << " has " << cr << " real and " << cg
                                   << " generated examples; it needs both";
    for (double c : h.c)
      h.w.push_back(cfg_.balanced ? (c > 0.5 ? 0.5 / static_cast<double>(cr) : 0.5 / static_cast<double>(cg))
                                  : 1.0 / static_cast<double>(cr + cg));
    const std::vector<double> beta = newton_fit(h, dim, cfg_.l2, cfg_.iters);
    const double prior = cfg_.balanced ? 0.0 : std::log(static_cast<double>(cg) / static_cast<double>(cr));
    for (int64_t j = 0; j <= dim; ++j)
      w_[static_cast<size_t>(hd * (dim + 1) + j)] =
          static_cast<float>(beta[static_cast<size_t>(j)] + (j == dim ? prior : 0));
    // Balanced accuracy and loss of the corrected logit (the log-ratio estimate) on the fitting set.
    double ok[2] = {0, 0}, ls[2] = {0, 0};
    for (size_t i = 0; i < h.c.size(); ++i) {
      double s = prior;
      for (int64_t j = 0; j <= dim; ++j)
        s += beta[static_cast<size_t>(j)] * h.x[i * static_cast<size_t>(dim + 1) + static_cast<size_t>(j)];
      const int side = h.c[i] > 0.5 ? 0 : 1;
      ok[side] += (side == 0) == (s > 0);
      const double m = side == 0 ? -s : s;
      ls[side] += m > 0 ? m + std::log1p(std::exp(-m)) : std::log1p(std::exp(m));
    }
    acc_sum += 0.5 * (ok[0] / static_cast<double>(cr) + ok[1] / static_cast<double>(cg));
    loss_sum += 0.5 * (ls[0] / static_cast<double>(cr) + ls[1] / static_cast<double>(cg));
  }
  st.accuracy = acc_sum / static_cast<double>(heads_);
  st.loss = loss_sum / static_cast<double>(heads_);
  return st;
}

double Discriminator::logit(const float* f, int32_t y) const {
  TEMPER_CHECK(fitted()) << "discriminator: used before it was fitted";
  const float* w = w_.data() + head(y) * (dim_ + 1);
  double s = w[dim_];
  for (int64_t j = 0; j < dim_; ++j)
    s += static_cast<double>(w[j]) * (f[j] - mean_[static_cast<size_t>(j)]) * inv_sd_[static_cast<size_t>(j)];
  return s;
}

double Discriminator::reward(const float* f, int32_t y) const {
  return std::clamp(logit(f, y), -cfg_.clip, cfg_.clip);
}

std::vector<double> Discriminator::rewards(const std::vector<float>& f, const std::vector<int32_t>& y) const {
  std::vector<double> r(y.size());
  for (size_t i = 0; i < y.size(); ++i) r[i] = reward(f.data() + i * static_cast<size_t>(dim_), y[i]);
  return r;
}

std::vector<std::pair<std::string, std::vector<float>>> Discriminator::tensors(const std::string& prefix) const {
  return {{prefix + ".mean", mean_}, {prefix + ".inv_sd", inv_sd_}, {prefix + ".head", w_}};
}

void Discriminator::load(const std::vector<std::pair<std::string, std::vector<float>>>& tensors,
                         const std::string& prefix) {
  auto find = [&](const std::string& name) -> const std::vector<float>& {
    for (const auto& [n, v] : tensors)
      if (n == prefix + "." + name) return v;
    TEMPER_FAIL() << "discriminator: the checkpoint has no tensor '" << prefix << "." << name << "'";
  };
  mean_ = find("mean"), inv_sd_ = find("inv_sd"), w_ = find("head");
  dim_ = static_cast<int64_t>(mean_.size());
  TEMPER_CHECK(dim_ > 0 && inv_sd_.size() == mean_.size() && w_.size() % static_cast<size_t>(dim_ + 1) == 0)
      << "discriminator: tensors '" << prefix << ".*' do not fit together (" << mean_.size() << ", " << inv_sd_.size()
      << ", " << w_.size() << ")";
  heads_ = static_cast<int64_t>(w_.size()) / (dim_ + 1);
}

}  // namespace temper::flow
