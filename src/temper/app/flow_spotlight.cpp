#include "temper/app/flow_spotlight.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include "temper/app/flow_checkpoint.h"
#include "temper/app/flow_setup.h"
#include "temper/app/flow_spotlight_join.h"
#include "temper/app/flow_spotlight_recipe.h"
#include "temper/app/flow_spotlight_setup.h"
#include "temper/core/error.h"
#include "temper/core/rng.h"
#include "temper/core/thread_pool.h"
#include "temper/report/metrics_sink.h"
#include "temper/spotlight/trainer.h"

namespace temper::app {

namespace {

// The models, the discriminator (fitted on the base, or restored) and the reward the trainer and explorers share.
struct SpotlightParts {
  FlowParts parts;
  std::unique_ptr<flow::VelocityModel> base;
  std::unique_ptr<flow::DgRl> rl;
  spotlight::RewardFn reward;
};

SpotlightParts build_parts(const FlowSpotlightRecipe& rc, const std::optional<SideCheckpoint>& ck) {
  SpotlightParts p;
  p.parts = build_flow(rc.setup);
  p.base = make_model(rc.setup, *p.parts.data);
  if (ck) {
    load_model_tensors(*p.base, *ck, "base.");
    load_model_tensors(*p.parts.model, *ck, "model.");
  } else {
    const SideCheckpoint b = read_run_checkpoint(rc.base, "temper flow spotlight");
    load_model_tensors(*p.base, b, "model.");
    load_model_tensors(*p.parts.model, b, "model.");
    std::printf("temper flow spotlight: base %s (step %lld)\n", b.from.c_str(), static_cast<long long>(b.step));
  }
  p.rl = std::make_unique<flow::DgRl>(*p.parts.model, *p.base, *p.parts.data, *p.parts.features, rc.rl);
  if (rc.reward == "density") {
    const flow::Toy2d* toy = p.parts.data->known();
    TEMPER_CHECK(toy)
        << "temper flow spotlight: rl.reward = \"density\" needs 2-D data with a known density, the base's is "
        << p.parts.data->name();
    const double clip = rc.reward_clip;
    p.reward = [toy, clip](const std::vector<float>& x, const std::vector<int32_t>& y) {
      std::vector<double> r(y.size());
      for (size_t i = 0; i < y.size(); ++i)
        r[i] = std::clamp(toy->log_density(x[2 * i], x[2 * i + 1], toy->classes() > 1 ? y[i] : -1), -clip, clip);
      return r;
    };
    return p;
  }
  if (ck) {
    flow_checkpoint_get_dg_rl(*ck, *p.rl);
  } else {
    const flow::DiscFitStats st = p.rl->refit(*p.base, 0);
    std::printf(
        "temper flow spotlight: discriminator fitted on %lld real vs %lld base samples, balanced accuracy %.3f\n",
        static_cast<long long>(st.real), static_cast<long long>(st.gen), st.accuracy);
  }
  flow::DgRl* rl = p.rl.get();
  p.reward = [rl](const std::vector<float>& x, const std::vector<int32_t>& y) { return rl->rewards(x, y); };
  return p;
}

}  // namespace

int run_flow_spotlight(const SideRunOptions& o) {
  FlowSpotlightRecipe rc;
  SideRun run("temper flow spotlight", o, kFlowSpotlightRecipe, [&rc](Recipe& r) { rc.read(r); });
  const std::optional<SideCheckpoint> ck = run.open();
  run.start();
  if (o.threads <= 0 && rc.spot.explorers > 0 && rc.spot.replay.empty()) {
    // The explorers' cores are not the trainer's: a pool waiting on threads that have no core stalls every step.
    const int hw = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    set_num_threads(std::max(1, hw - static_cast<int>(rc.spot.explorers * rc.spot.explorer_threads)));
  }
  SpotlightParts sp = build_parts(rc, ck);
  flow::VelocityModel& policy = *sp.parts.model;
  const flow::DataSource& data = *sp.parts.data;
  const int64_t groups = rc.rl.grpo.groups;
  const auto seed = static_cast<uint64_t>(rc.rl.seed);
  auto labels = [&data, groups, seed](int64_t step) {
    std::vector<float> x;
    std::vector<int32_t> y;
    data.sample(groups, mix_seed(mix_seed(seed, static_cast<uint64_t>(step)), 1), x, y);
    return y;
  };
  spotlight::SpotlightTrainer tr(policy, *sp.base, sp.reward, labels, rc.rl, rc.spot, data.classes());
  int64_t start = 0;
  double wall = 0;
  if (ck) {
    tr.restore([&](const std::string& name) -> const std::vector<float>& { return ck->tensor(name); },
               ck->state.at("spotlight"));
    start = ck->step, wall = ck->state.at("wall_s").get<double>();
    std::printf("temper flow spotlight: resuming %s at step %lld\n", run.dir().c_str(), static_cast<long long>(start));
  }
  ExplorerSetup es;
  es.flow_config = rc.base_config, es.seed = seed, es.sde = rc.rl.sde, es.sampler = rc.spot.sampler;
  es.reward = rc.reward, es.clip = rc.reward_clip, es.min_request_s = rc.spot.min_request_s;
  if (rc.reward == "discriminator") es.tensors = sp.rl->disc().tensors("disc");
  const std::vector<std::string> argv = explorer_argv(rc.spot.explorer_threads, rc.spot.explorer_nice);
  tr.start_explorers({argv, setup_message(es)});
  const std::string schedule = run.dir() + "/schedule.jsonl";
  // Without the lines after `start` (a resumed run rewrites what follows; a line cut by a crash is dropped).
  report::JsonlFile sched = report::JsonlFile::resume_after_step(schedule, start);
  std::printf(
      "temper flow spotlight: %lld explorers, G %lld x %lld groups, %lld candidates a group, %lld steps on %s -> %s\n",
      static_cast<long long>(rc.spot.explorers), static_cast<long long>(rc.rl.grpo.group),
      static_cast<long long>(groups), static_cast<long long>(rc.spot.planner.seeds_per_class),
      static_cast<long long>(rc.rl.steps), data.name().c_str(), run.dir().c_str());
  const flow::EvalReference ref = flow::eval_reference(data, *sp.parts.features, rc.eval);
  auto evaluate = [&](int64_t step) {
    flow::Metrics m;
    std::vector<float> x;
    flow::evaluate_model(policy, data, *sp.parts.features, ref, rc.eval, rc.rl.sde, m, &x);
    m.emplace_back("wall_s", wall);
    run.metrics().write(step, "eval", m);
    write_samples_png(data, x, ref.y, run.dir() + "/images/samples-step-" + std::to_string(step) + ".png");
    std::printf("step %lld: wall %.2f s, fd %.5f\n", static_cast<long long>(step), wall,
                flow::metric(m, rc.eval.sampler == "sde" ? "fd_sde" : "fd"));
    std::fflush(stdout);
  };
  if (!ck) evaluate(0);
  auto save = [&](int64_t step) {
    SideCheckpoint c;
    c.step = step;
    c.tensors = model_tensors(policy, "model.");
    for (auto& t : model_tensors(*sp.base, "base.")) c.tensors.push_back(std::move(t));
    for (auto& t : tr.state_tensors()) c.tensors.push_back(std::move(t));
    c.state = {{"spotlight", tr.state()}, {"wall_s", wall}};
    flow_checkpoint_put_dg_rl(c, *sp.rl);
    run.save(c);
  };
  for (int64_t step = start + 1; step <= rc.rl.steps; ++step) {
    flow::Metrics m = tr.step(step);
    wall += flow::metric(m, "step_s");
    m.emplace_back("wall_s", wall);
    run.metrics().write(step, "train", m);
    sched.append_line(spotlight::schedule_line(step, tr.last_groups()).dump());
    const bool last = step == rc.rl.steps;
    if ((rc.eval_every > 0 && step % rc.eval_every == 0) || last) evaluate(step);
    const bool stop = run.should_stop(step);
    if (step % rc.checkpoint_every == 0 || last || stop) save(step);
    if (stop) {
      tr.finish();
      std::printf("temper flow spotlight: stopped after step %lld; continue with --resume %s\n",
                  static_cast<long long>(step), run.dir().c_str());
      run.finish();
      return 0;
    }
  }
  tr.finish();
  print_pool_summary(tr);
  if (rc.spot.time_join && rc.spot.explorers > 0) time_joins(es, argv, tr.store(), run);
  const std::string report = run.finish();
  std::printf("temper flow spotlight: done, %lld steps, %.2f s training; report %s\n",
              static_cast<long long>(rc.rl.steps), wall, report.c_str());
  return 0;
}

}  // namespace temper::app
