#include "temper/flow/evaluate.h"

#include <algorithm>
#include <cmath>

#include "temper/core/error.h"
#include "temper/core/rng.h"
#include "temper/flow/density_grid.h"
#include "temper/flow/mmd.h"
#include "temper/flow/ode_density.h"

namespace temper::flow {

void EvalConfig::visit(KeyVisitor& v) {
  v("samples", samples, "generated and real reference samples per evaluation");
  v.choice("sampler", sampler, "the evaluation's sampler", {"ode", "sde", "both"});
  v("steps", steps, "ODE steps");
  v("cfg", cfg, "classifier-free guidance scale (1: guidance-free)");
  v("seed", seed, "the reference set's and the evaluation noise's draws");
  v("mmd_samples", mmd_samples, "rows of each set MMD and precision/recall use");
  v("pr_k", pr_k, "k of the k-NN precision and recall");
}

void EvalConfig::validate() const {
  TEMPER_CHECK(samples >= 10) << "eval.samples: expected >= 10, got " << samples;
  TEMPER_CHECK(steps >= 1) << "eval.steps: expected >= 1, got " << steps;
  TEMPER_CHECK(mmd_samples > pr_k && pr_k >= 1)
      << "eval.mmd_samples and eval.pr_k: expected mmd_samples > pr_k >= 1, got " << mmd_samples << " and " << pr_k;
  TEMPER_CHECK(sampler == "ode" || sampler == "sde" || sampler == "both")
      << "eval.sampler: expected \"ode\", \"sde\" or \"both\", got '" << sampler << "'";
}

double metric(const Metrics& m, const std::string& name) {
  for (const auto& [n, v] : m)
    if (n == name) return v;
  TEMPER_FAIL() << "evaluation: no metric '" << name << "' (" << m.size() << " metrics)";
}

EvalReference eval_reference(const DataSource& data, const Features& f, const EvalConfig& c) {
  c.validate();
  EvalReference r;
  data.sample(c.samples, mix_seed(static_cast<uint64_t>(c.seed), 1), r.x, r.y);
  r.features = embed_all(f, r.x);
  r.gaussian = feature_gaussian(r.features.data(), c.samples, f.dim());
  const int64_t m = std::min(c.mmd_samples, c.samples);
  r.bandwidth = mmd_rbf(r.features.data(), m / 2, r.features.data() + (m / 2) * f.dim(), m - m / 2, f.dim()).bandwidth;
  std::vector<float> x2;
  std::vector<int32_t> y2;
  data.sample(c.samples, mix_seed(static_cast<uint64_t>(c.seed), 3), x2, y2);
  const std::vector<float> f2 = embed_all(f, x2);
  r.fd_real = frechet_distance(r.gaussian, feature_gaussian(f2.data(), c.samples, f.dim()));
  r.mmd_real = mmd_rbf(r.features.data(), m, f2.data(), m, f.dim(), r.bandwidth).mmd2;
  return r;
}

void sample_metrics(const std::vector<float>& x, const std::vector<int32_t>& y, const DataSource& data,
                    const Features& f, const EvalReference& ref, const EvalConfig& c, const std::string& suffix,
                    Metrics& out) {
  const auto n = static_cast<int64_t>(y.size());
  const std::vector<float> feats = embed_all(f, x);
  const int64_t D = f.dim();
  out.emplace_back("fd" + suffix, frechet_distance(ref.gaussian, feature_gaussian(feats.data(), n, D)));
  const int64_t m = std::min({c.mmd_samples, n, static_cast<int64_t>(ref.y.size())});
  out.emplace_back("mmd" + suffix, mmd_rbf(ref.features.data(), m, feats.data(), m, D, ref.bandwidth).mmd2);
  const PrecisionRecall pr = precision_recall(ref.features.data(), m, feats.data(), m, D, c.pr_k);
  out.emplace_back("precision" + suffix, pr.precision);
  out.emplace_back("recall" + suffix, pr.recall);
  if (const Toy2d* truth = data.known()) {
    const GridDistance g = density_distance(*truth, x.data(), n);
    out.emplace_back("tv" + suffix, g.tv);
    out.emplace_back("grid_kl" + suffix, g.kl);
    double nll = 0;  // under p_data(x | y)
    for (int64_t i = 0; i < n; ++i)
      nll -= truth->log_density(x[static_cast<size_t>(2 * i)], x[static_cast<size_t>(2 * i + 1)],
                                truth->classes() > 1 ? y[static_cast<size_t>(i)] : -1);
    out.emplace_back("nll" + suffix, nll / static_cast<double>(n));
  }
}

void evaluate_model(VelocityModel& m, const DataSource& data, const Features& f, const EvalReference& ref,
                    const EvalConfig& c, const SdeConfig& sde, Metrics& out, std::vector<float>* x_out) {
  const auto n = static_cast<int64_t>(ref.y.size());
  const uint64_t seed = mix_seed(static_cast<uint64_t>(c.seed), 2);
  const Toy2d* truth = data.known();
  out.emplace_back("fd_real", ref.fd_real);
  out.emplace_back("mmd_real", ref.mmd_real);
  if (c.sampler != "sde") {
    OdeConfig oc;
    oc.steps = c.steps, oc.cfg = c.cfg;
    const std::vector<float> z = initial_noise(n, m.dim(), seed);
    std::vector<float> x;
    if (truth && m.dim() <= 8) {  // with exact log-densities: KL(q || p_data)
      const OdeSamples s = sample_ode_with_density(m, z.data(), ref.y.data(), n, oc);
      double kl = 0;
      for (int64_t i = 0; i < n; ++i)
        kl += s.logq[static_cast<size_t>(i)] -
              truth->log_density(s.x[static_cast<size_t>(2 * i)], s.x[static_cast<size_t>(2 * i + 1)],
                                 truth->classes() > 1 ? ref.y[static_cast<size_t>(i)] : -1);
      out.emplace_back("kl_model_data", kl / static_cast<double>(n));
      x = s.x;
    } else {
      x = sample_ode(m, z.data(), ref.y.data(), n, oc);
    }
    sample_metrics(x, ref.y, data, f, ref, c, "", out);
    if (x_out) *x_out = std::move(x);
  }
  if (c.sampler != "ode") {
    SdeConfig sc = sde;
    sc.cfg = c.cfg;
    const SdeTrajectory tr = sample_sde(m, ref.y.data(), n, sc, seed);
    const std::vector<float> x(tr.sample(), tr.sample() + n * m.dim());
    sample_metrics(x, ref.y, data, f, ref, c, "_sde", out);
    if (x_out && c.sampler == "sde") *x_out = x;
  }
}

}  // namespace temper::flow
