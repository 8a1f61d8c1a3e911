#include "temper/app/flow_tools.h"

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "temper/app/flow_setup.h"
#include "temper/app/run_dir.h"
#include "temper/core/error.h"
#include "temper/core/rng.h"
#include "temper/core/thread_pool.h"
#include "temper/flow/evaluate.h"
#include "temper/flow/sampler.h"

namespace temper::app {

namespace {

struct LoadedRun {
  FlowSetup setup;
  FlowParts parts;
};

// The model of RUN's newest checkpoint with its setup (an rl run's comes from its rl.base run).
LoadedRun load_run(const FlowToolOptions& o, const std::string& command) {
  if (o.threads > 0) set_num_threads(o.threads);
  TEMPER_CHECK(!o.run.empty()) << command << ": give the run directory (a temper flow train or rl run)";
  Recipe r = Recipe::load(recorded_config(o.run));
  LoadedRun l;
  if (r.has("rl.base")) {
    Recipe b = Recipe::load(recorded_config(r.get_string("rl.base", "")));
    l.setup.read(b);
  } else {
    l.setup.read(r);
  }
  l.parts = build_flow(l.setup);
  const SideCheckpoint c = read_run_checkpoint(o.run, command);
  load_model_tensors(*l.parts.model, c, "model.");
  std::fprintf(stderr, "%s: %s (step %lld)\n", command.c_str(), c.from.c_str(), static_cast<long long>(c.step));
  return l;
}

void check_sampler(const FlowToolOptions& o, const std::string& command) {
  TEMPER_CHECK(o.sampler == "ode" || o.sampler == "sde")
      << command << ": --sampler: expected ode or sde, got '" << o.sampler << "'";
  TEMPER_CHECK(o.n >= 1 && o.steps >= 1) << command << ": --n and --steps must be >= 1";
}

}  // namespace

int run_flow_sample(const FlowToolOptions& o) {
  const std::string cmd = "temper flow sample";
  check_sampler(o, cmd);
  TEMPER_CHECK(o.out.size() > 4 && (o.out.ends_with(".png") || o.out.ends_with(".csv")))
      << cmd << ": --out: expected a .png or .csv file, got '" << o.out << "'";
  LoadedRun l = load_run(o, cmd);
  flow::VelocityModel& m = *l.parts.model;
  TEMPER_CHECK(o.label < m.classes()) << cmd << ": --class " << o.label << ": the model has classes 0.."
                                      << m.classes() - 1;
  std::vector<int32_t> y(static_cast<size_t>(o.n));
  for (int64_t i = 0; i < o.n; ++i)
    y[static_cast<size_t>(i)] = static_cast<int32_t>(o.label >= 0 ? o.label : i % m.classes());
  std::vector<float> x;
  const uint64_t seed = static_cast<uint64_t>(o.seed);
  if (o.sampler == "ode") {
    flow::OdeConfig c;
    c.steps = o.steps, c.cfg = o.cfg;
    const std::vector<float> z = flow::initial_noise(o.n, m.dim(), seed);
    x = flow::sample_ode(m, z.data(), y.data(), o.n, c);
  } else {
    flow::SdeConfig c;
    c.steps = o.steps, c.cfg = o.cfg, c.noise = o.noise;
    const flow::SdeTrajectory tr = flow::sample_sde(m, y.data(), o.n, c, seed);
    x.assign(tr.sample(), tr.sample() + o.n * m.dim());
  }
  if (o.out.ends_with(".png")) {
    write_samples_png(*l.parts.data, x, y, o.out);
  } else {
    std::ofstream f(o.out);
    TEMPER_CHECK(f.good()) << cmd << ": cannot write " << o.out;
    for (int64_t i = 0; i < o.n; ++i) {
      f << y[static_cast<size_t>(i)];
      for (int64_t j = 0; j < m.dim(); ++j) f << ',' << x[static_cast<size_t>(i * m.dim() + j)];
      f << '\n';
    }
    TEMPER_CHECK(f.good()) << cmd << ": writing " << o.out << " failed";
  }
  std::printf("%s: %lld samples -> %s\n", cmd.c_str(), static_cast<long long>(o.n), o.out.c_str());
  return 0;
}

int run_flow_eval(const FlowToolOptions& o) {
  const std::string cmd = "temper flow eval";
  check_sampler(o, cmd);
  LoadedRun l = load_run(o, cmd);
  flow::EvalConfig c;
  c.samples = o.n, c.sampler = o.sampler, c.steps = o.steps, c.cfg = o.cfg, c.seed = o.seed;
  c.mmd_samples = std::min<int64_t>(1000, o.n);
  c.validate();
  flow::SdeConfig sde;
  sde.steps = o.steps, sde.noise = o.noise;
  const flow::EvalReference ref = flow::eval_reference(*l.parts.data, *l.parts.features, c);
  flow::Metrics m;
  flow::evaluate_model(*l.parts.model, *l.parts.data, *l.parts.features, ref, c, sde, m);
  nlohmann::ordered_json j;
  j["run"] = o.run, j["samples"] = o.n, j["sampler"] = o.sampler, j["cfg"] = o.cfg,
  j["features"] = l.parts.features->name();
  for (const auto& [k, v] : m) j[k] = v;
  if (!o.out.empty()) {
    std::ofstream f(o.out);
    f << j.dump(2) << '\n';
    TEMPER_CHECK(f.good()) << cmd << ": writing " << o.out << " failed";
  }
  std::printf("%s\n", j.dump(2).c_str());
  return 0;
}

}  // namespace temper::app
