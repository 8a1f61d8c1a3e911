// The tabular training run (see tabular_run.h).
#include "temper/app/tabular_run.h"

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "temper/app/tabular_checkpoint.h"
#include "temper/app/tabular_recipe.h"
#include "temper/core/error.h"
#include "temper/tabular/hypervolume.h"
#include "temper/tabular/trainer.h"

namespace temper::app {
namespace {

void print_start(const tabular::ProductMdp& p, const tabular::TabularConfig& c, const std::vector<double>& truth,
                 const std::string& note, const std::string& dir) {
  std::string machines;
  for (const auto& m : p.machines) machines += (machines.empty() ? "" : ", ") + m.name;
  std::fprintf(stderr,
               "temper tabular train: %s, world %s (%lld states, %lld actions), machines %s (%lld joint states), "
               "objectives %s; %lld steps -> %s\n",
               std::string(enum_name(tabular::kMethodNames, c.method)).c_str(), p.world.name.c_str(),
               static_cast<long long>(p.S()), static_cast<long long>(p.A()), machines.c_str(),
               static_cast<long long>(p.U), join_words(p.objectives, ", ").c_str(), static_cast<long long>(c.steps),
               dir.c_str());
  if (truth.empty())
    std::fprintf(stderr, "  true front: %s\n", note.c_str());
  else
    std::fprintf(stderr, "  true front: %zu points, hypervolume %.6g\n", truth.size() / p.D,
                 tabular::hypervolume(std::span<const double>(truth), p.D, c.reference));
}

void print_metrics(int64_t step, const tabular::Metrics& m) {
  std::fprintf(stderr, "step %lld", static_cast<long long>(step));
  for (const auto& [k, v] : m)
    if (k == "hypervolume" || k == "front_size" || k == "hv_ratio" || k == "recovered" || k == "spurious")
      std::fprintf(stderr, "  %s %.6g", k.c_str(), v);
  std::fprintf(stderr, "\n");
}

}  // namespace

int tabular_train(const SideRunOptions& o) {
  tabular::TabularConfig cfg;
  SideRun run("temper tabular train", o, kTabularDefaultRecipe, [&](Recipe& r) { read_tabular_config(r, cfg); });
  const std::optional<SideCheckpoint> ck = run.open();
  const tabular::ProductMdp p = tabular::build_product(cfg);  // refuses bad worlds and machines before writing
  std::string note;
  const std::vector<double> truth = tabular_truth(p, cfg, &note);
  tabular::TabularTrainer t(p, cfg, truth);
  if (ck) {
    t.load(from_checkpoint(*ck));
    TEMPER_CHECK(t.steps() == ck->step) << ck->from << ": the state says step " << t.steps() << ", the checkpoint "
                                        << ck->step;
  }
  run.start();
  print_start(p, cfg, truth, note, run.dir());
  int64_t last_saved = ck ? ck->step : -1;
  const int64_t first = t.steps();
  const auto t0 = std::chrono::steady_clock::now();
  while (t.steps() < cfg.steps) {
    t.step();
    const int64_t step = t.steps();
    if (step % cfg.eval_every == 0 || step == cfg.steps) {
      const tabular::Metrics m = t.evaluate();
      run.metrics().write(step, "train", m);
      print_metrics(step, m);
    }
    const bool stop = run.should_stop(step);
    if (step % cfg.checkpoint_every == 0 || step == cfg.steps || stop) {
      run.save(to_checkpoint(t));
      last_saved = step;
    }
    if (stop) {
      std::fprintf(stderr, "temper tabular train: stopped at step %lld; continue with --resume %s\n",
                   static_cast<long long>(step), run.dir().c_str());
      run.finish();
      return 0;
    }
  }
  if (last_saved != t.steps()) run.save(to_checkpoint(t));
  const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::fprintf(stderr,
               "temper tabular train: %lld steps in %.3f s (%.3f us per step, metrics and checkpoints included)\n",
               static_cast<long long>(t.steps() - first), sec, 1e6 * sec / std::max<int64_t>(1, t.steps() - first));
  std::fprintf(stderr, "temper tabular train: done; the front: temper tabular front %s; report: %s\n",
               run.dir().c_str(), run.finish().c_str());
  return 0;
}

}  // namespace temper::app
