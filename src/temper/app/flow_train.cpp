#include "temper/app/flow_train.h"

#include <cstdio>
#include <string>

#include "temper/app/flow_checkpoint.h"
#include "temper/app/flow_setup.h"
#include "temper/core/error.h"
#include "temper/flow/evaluate.h"
#include "temper/flow/fm_train.h"

namespace temper::app {

const char* const kFlowTrainRecipe =
    R"(# temper flow train's built-in recipe: a 2-D MLP flow on eight Gaussians (CPU, about a minute)
[data]
kind = "gaussians"

[model]
kind = "mlp2d"

[train]
steps = 3000

[eval]
every = 500

[run]
out = "runs/flow-gaussians"
)";

namespace {

struct FlowTrainRecipe {
  FlowSetup setup;
  flow::FmTrainConfig train;
  flow::EvalConfig eval;
  flow::SdeConfig sde;  // the evaluation's SDE sampler (eval.sampler = "sde" or "both")
  int64_t eval_every = 500, patience = 0, checkpoint_every = 500;
  void read(Recipe& r) {
    setup.read(r);
    read_section(r, "train.", [&](KeyVisitor& v) {
      train.visit(v);
      v("checkpoint_every", checkpoint_every, "steps between checkpoints (and at the end)");
      train.validate();
    });
    read_section(r, "eval.", [&](KeyVisitor& v) {
      eval.visit(v);
      v("every", eval_every, "steps between evaluations (0: only at the end)");
      v("patience", patience, "stop when FD has not improved by 1% in this many evaluations (0: never)");
      v("sde_steps", sde.steps, "the SDE sampler's steps (sampler = sde or both)");
      v("sde_noise", sde.noise, "the SDE sampler's noise level a");
      eval.validate();
    });
    TEMPER_CHECK(checkpoint_every >= 1 && eval_every >= 0 && patience >= 0)
        << r.source() << ": train.checkpoint_every >= 1, eval.every >= 0 and eval.patience >= 0 expected";
  }
};

}  // namespace

int run_flow_train(const SideRunOptions& o) {
  FlowTrainRecipe rc;
  SideRun run("temper flow train", o, kFlowTrainRecipe, [&rc](Recipe& r) { rc.read(r); });
  const std::optional<SideCheckpoint> ck = run.open();
  run.start();
  FlowParts parts = build_flow(rc.setup);
  flow::VelocityModel& model = *parts.model;
  model.init_params(static_cast<uint64_t>(rc.train.seed));
  nn::AdamW opt(model.param_count());
  int64_t start = 0, since_best = 0;
  double best_fd = 0;
  if (ck) {
    load_model_tensors(model, *ck);
    flow_checkpoint_get_adamw(*ck, opt);
    since_best = ck->state.value("since_best", int64_t{0});
    best_fd = ck->state.value("best_fd", 0.0);
    start = ck->step;
    std::printf("temper flow train: resuming %s at step %lld\n", run.dir().c_str(), static_cast<long long>(start));
  }
  std::printf("temper flow train: %s on %s, %lld parameters, %lld steps -> %s\n", rc.setup.model_kind.c_str(),
              parts.data->name().c_str(), static_cast<long long>(model.param_count()),
              static_cast<long long>(rc.train.steps), run.dir().c_str());
  const flow::EvalReference ref = flow::eval_reference(*parts.data, *parts.features, rc.eval);
  std::vector<float> grad;
  bool plateau = rc.patience > 0 && since_best >= rc.patience;  // a run that stopped on its plateau stays stopped
  auto save = [&](int64_t step) {
    SideCheckpoint c;
    c.step = step;
    c.tensors = model_tensors(model);
    flow_checkpoint_put_adamw(c, opt);
    c.state["since_best"] = since_best, c.state["best_fd"] = best_fd;
    run.save(c);
  };
  int64_t step = start;
  while (step < rc.train.steps && !plateau) {
    ++step;
    const flow::FmStepStats st = flow::fm_train_step(model, opt, *parts.data, rc.train, step, grad);
    run.metrics().write(step, "train", {{"loss", st.loss}, {"grad_norm", st.grad_norm}, {"lr", st.lr}});
    const bool last = step == rc.train.steps;
    if ((rc.eval_every > 0 && step % rc.eval_every == 0) || last) {
      flow::Metrics m;
      std::vector<float> x;
      flow::evaluate_model(model, *parts.data, *parts.features, ref, rc.eval, rc.sde, m, &x);
      const double fd = flow::metric(m, rc.eval.sampler == "sde" ? "fd_sde" : "fd");
      if (best_fd == 0 || fd < 0.99 * best_fd)
        best_fd = fd, since_best = 0;
      else
        ++since_best;
      plateau = rc.patience > 0 && since_best >= rc.patience;
      m.emplace_back("best_fd", best_fd);
      run.metrics().write(step, "eval", m);
      write_samples_png(*parts.data, x, ref.y, run.dir() + "/images/samples-step-" + std::to_string(step) + ".png");
      std::printf("step %lld: loss %.4f fd %.5f%s\n", static_cast<long long>(step), st.loss, fd,
                  plateau ? " (FD stopped improving: stopping)" : "");
      std::fflush(stdout);
    }
    const bool stop = run.should_stop(step);
    if (step % rc.checkpoint_every == 0 || last || plateau || stop) save(step);
    if (stop) {
      std::printf("temper flow train: stopped after step %lld; continue with --resume %s\n",
                  static_cast<long long>(step), run.dir().c_str());
      run.finish();
      return 0;
    }
  }
  const std::string report = run.finish();
  std::printf("temper flow train: done, %lld steps; report %s\n", static_cast<long long>(step), report.c_str());
  return 0;
}

}  // namespace temper::app
