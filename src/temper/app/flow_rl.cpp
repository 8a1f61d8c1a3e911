#include "temper/app/flow_rl.h"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>

#include "temper/app/flow_checkpoint.h"
#include "temper/app/flow_setup.h"
#include "temper/app/run_dir.h"
#include "temper/core/error.h"
#include "temper/core/rng.h"
#include "temper/flow/dg_rl.h"
#include "temper/flow/evaluate.h"
#include "temper/flow/ode_density.h"

namespace temper::app {

namespace {

const char* const kFlowRlRecipe =
    R"(# temper flow rl's built-in recipe: DG-RL (GRPO, beta 1) from the built-in temper flow train run
[rl]
base = "runs/flow-gaussians"
method = "grpo"
steps = 200

[eval]
every = 50
sampler = "both"

[run]
out = "runs/flow-gaussians-rl"
)";

struct FlowRlRecipe {
  std::string base;
  FlowSetup setup;  // the base run's
  flow::DgRlConfig rl;
  flow::EvalConfig eval;
  int64_t eval_every = 50, checkpoint_every = 50;
  void read(Recipe& r) {
    base = r.get_string("rl.base", "");
    TEMPER_CHECK(!base.empty()) << r.source() << ": rl.base: expected the run directory of a temper flow train run";
    Recipe b = Recipe::load(recorded_config(base));  // the base's [data], [features], [model]
    setup.read(b);
    read_section(r, "rl.", [&](KeyVisitor& v) {
      rl.visit(v);
      v("checkpoint_every", checkpoint_every, "steps between checkpoints (and at the end)");
    });
    RecipeReader sde_v(r, "rl.sde."), grpo_v(r, "rl.grpo."), disc_v(r, "rl.discriminator.");
    rl.visit_sections(sde_v, grpo_v, disc_v);
    eval.sampler = "both";
    read_section(r, "eval.", [&](KeyVisitor& v) {
      eval.visit(v);
      v("every", eval_every, "RL steps between evaluations (0: only at the start and the end)");
      eval.validate();
    });
    try {
      rl.validate();
    } catch (const Error& e) {
      TEMPER_FAIL() << r.source() << ": " << e.what();
    }
    TEMPER_CHECK(checkpoint_every >= 1 && eval_every >= 0)
        << r.source() << ": rl.checkpoint_every >= 1 and eval.every >= 0 expected";
  }
};

// Pearson correlation of the discriminator's logit with log p_data(x | y) - log p_0(x | y) at the base's ODE samples.
double logit_ratio_correlation(flow::DgRl& rl, flow::VelocityModel& base, const flow::DataSource& data,
                               const flow::EvalReference& ref, int64_t steps) {
  const flow::Toy2d* truth = data.known();
  const auto n = static_cast<int64_t>(ref.y.size());
  flow::OdeConfig oc;
  oc.steps = steps;
  const std::vector<float> z = flow::initial_noise(n, base.dim(), mix_seed(99, 1));
  const flow::OdeSamples s = flow::sample_ode_with_density(base, z.data(), ref.y.data(), n, oc);
  std::vector<double> logit(static_cast<size_t>(n)), truth_r(static_cast<size_t>(n));
  const std::vector<double> r = rl.rewards(s.x, ref.y);
  double ma = 0, mb = 0;
  for (int64_t i = 0; i < n; ++i) {
    const int32_t y = truth->classes() > 1 ? ref.y[static_cast<size_t>(i)] : -1;
    logit[static_cast<size_t>(i)] = r[static_cast<size_t>(i)];
    truth_r[static_cast<size_t>(i)] =
        truth->log_density(s.x[static_cast<size_t>(2 * i)], s.x[static_cast<size_t>(2 * i + 1)], y) -
        s.logq[static_cast<size_t>(i)];
    ma += logit[static_cast<size_t>(i)], mb += truth_r[static_cast<size_t>(i)];
  }
  ma /= static_cast<double>(n), mb /= static_cast<double>(n);
  double sab = 0, saa = 0, sbb = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double a = logit[static_cast<size_t>(i)] - ma, b = truth_r[static_cast<size_t>(i)] - mb;
    sab += a * b, saa += a * a, sbb += b * b;
  }
  return sab / std::sqrt(saa * sbb);
}

}  // namespace

int run_flow_rl(const SideRunOptions& o) {
  FlowRlRecipe rc;
  SideRun run("temper flow rl", o, kFlowRlRecipe, [&rc](Recipe& r) { rc.read(r); });
  const std::optional<SideCheckpoint> ck = run.open();
  run.start();
  FlowParts parts = build_flow(rc.setup);
  std::unique_ptr<flow::VelocityModel> base = make_model(rc.setup, *parts.data);
  flow::VelocityModel& policy = *parts.model;
  if (ck) {
    load_model_tensors(*base, *ck, "base.");
    load_model_tensors(policy, *ck, "model.");
  } else {
    const SideCheckpoint b = read_run_checkpoint(rc.base, "temper flow rl");
    load_model_tensors(*base, b, "model.");
    load_model_tensors(policy, b, "model.");
    std::printf("temper flow rl: base %s (step %lld)\n", b.from.c_str(), static_cast<long long>(b.step));
  }
  flow::DgRl rl(policy, *base, *parts.data, *parts.features, rc.rl);
  int64_t start = 0;
  if (ck) {
    flow_checkpoint_get_adamw(*ck, rl.opt());
    flow_checkpoint_get_dg_rl(*ck, rl);
    start = ck->step;
    std::printf("temper flow rl: resuming %s at step %lld\n", run.dir().c_str(), static_cast<long long>(start));
  }
  std::printf("temper flow rl: %s, beta %g, %lld steps on %s -> %s\n", rc.rl.method.c_str(), rc.rl.beta,
              static_cast<long long>(rc.rl.steps), parts.data->name().c_str(), run.dir().c_str());
  const flow::EvalReference ref = flow::eval_reference(*parts.data, *parts.features, rc.eval);
  auto evaluate = [&](int64_t step) {
    flow::Metrics m;
    std::vector<float> x;
    flow::evaluate_model(policy, *parts.data, *parts.features, ref, rc.eval, rc.rl.sde, m, &x);
    if (step == 0 && rc.rl.method != "fm" && parts.data->known() && policy.dim() <= 8)
      m.emplace_back("disc_ratio_corr", logit_ratio_correlation(rl, *base, *parts.data, ref, rc.eval.steps));
    m.emplace_back("compute", rl.compute());
    run.metrics().write(step, "eval", m);
    write_samples_png(*parts.data, x, ref.y, run.dir() + "/images/samples-step-" + std::to_string(step) + ".png");
    std::printf("step %lld:", static_cast<long long>(step));
    for (const auto& [k, v] : m)
      if (k == "fd" || k == "fd_sde" || k == "mmd" || k == "kl_model_data" || k == "disc_ratio_corr")
        std::printf(" %s %.5f", k.c_str(), v);
    std::printf("\n");
    std::fflush(stdout);
  };
  if (!ck) {
    if (rc.rl.method != "fm") {
      const flow::DiscFitStats st = rl.refit(*base, 0);
      std::printf("temper flow rl: discriminator fitted on %lld real vs %lld base samples, balanced accuracy %.3f\n",
                  static_cast<long long>(st.real), static_cast<long long>(st.gen), st.accuracy);
    }
    evaluate(0);
  }
  auto save = [&](int64_t step) {
    SideCheckpoint c;
    c.step = step;
    c.tensors = model_tensors(policy, "model.");
    for (auto& t : model_tensors(*base, "base.")) c.tensors.push_back(std::move(t));
    flow_checkpoint_put_adamw(c, rl.opt());
    flow_checkpoint_put_dg_rl(c, rl);
    run.save(c);
  };
  for (int64_t step = start + 1; step <= rc.rl.steps; ++step) {
    run.metrics().write(step, "train", rl.step(step));
    const bool last = step == rc.rl.steps;
    if ((rc.eval_every > 0 && step % rc.eval_every == 0) || last) evaluate(step);
    const bool stop = run.should_stop(step);
    if (step % rc.checkpoint_every == 0 || last || stop) save(step);
    if (stop) {
      std::printf("temper flow rl: stopped after step %lld; continue with --resume %s\n", static_cast<long long>(step),
                  run.dir().c_str());
      run.finish();
      return 0;
    }
  }
  const std::string report = run.finish();
  std::printf("temper flow rl: done, %lld steps; report %s\n", static_cast<long long>(rc.rl.steps), report.c_str());
  return 0;
}

}  // namespace temper::app
