// One evaluation of a flow model against its data: `samples` generated with the real reference set's labels
// (so class frequencies match), through the ODE and/or the SDE sampler, guidance scale `cfg`; metrics in the
// frozen feature space: fd (Frechet distance, FID's formula), mmd (MMD^2, RBF at the reference's median
// bandwidth), precision and recall (k-NN); on data with a known density also grid TV and KL(p_data || q) of
// the histogram, the samples' NLL under p_data and, for ODE samples, kl_model_data = E_q[log q - log p_data]
// with the Euler map's exact log q (ode_density.h). Metric names get the suffix "_sde" for SDE samples;
// fd_real and mmd_real are a second real set's (the floor sampling noise puts under any model).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "temper/core/settings.h"
#include "temper/flow/data_source.h"
#include "temper/flow/features.h"
#include "temper/flow/frechet.h"
#include "temper/flow/sampler.h"

namespace temper::flow {

struct EvalConfig {
  int64_t samples = 2000;       // generated (and real reference) samples
  std::string sampler = "ode";  // ode | sde | both
  int64_t steps = 50;           // ODE steps (the SDE's are the run's sde.steps)
  double cfg = 1.0;             // guidance scale (1: guidance-free, the paper's FID setting)
  int64_t seed = 7777;          // the reference set's and the noise's draws
  int64_t mmd_samples = 1000;   // rows of each set MMD and precision/recall use (O(n^2))
  int64_t pr_k = 3;
  void validate() const;
  void visit(KeyVisitor& v);
};

// The real side, computed once per run.
struct EvalReference {
  std::vector<float> x, features;  // [n, dim], [n, feature dim]
  std::vector<int32_t> y;
  FeatureGaussian gaussian;
  double bandwidth = 0;              // MMD's, fixed for the run
  double fd_real = 0, mmd_real = 0;  // a second real set of the same size against it: the metrics' noise floor
};
EvalReference eval_reference(const DataSource& data, const Features& f, const EvalConfig& c);

using Metrics = std::vector<std::pair<std::string, double>>;
double metric(const Metrics& m, const std::string& name);  // throws naming the metric when it is missing
// Appends the metrics to `out`; `x_out` (optional) receives the first sampler's samples [n, dim].
void evaluate_model(VelocityModel& m, const DataSource& data, const Features& f, const EvalReference& ref,
                    const EvalConfig& c, const SdeConfig& sde, Metrics& out, std::vector<float>* x_out = nullptr);

// The metrics of given samples (x [n, dim] with labels) against the reference; suffix appended to the names.
void sample_metrics(const std::vector<float>& x, const std::vector<int32_t>& y, const DataSource& data,
                    const Features& f, const EvalReference& ref, const EvalConfig& c, const std::string& suffix,
                    Metrics& out);

}  // namespace temper::flow
