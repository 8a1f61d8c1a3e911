// Printing a tabular run's learned front beside the exact one (see tabular_front.h).
#include "temper/app/tabular_front.h"

#include <cstdio>
#include <nlohmann/json.hpp>

#include "temper/app/side_run.h"
#include "temper/app/tabular_checkpoint.h"
#include "temper/app/tabular_recipe.h"
#include "temper/core/error.h"
#include "temper/tabular/ground_truth.h"
#include "temper/tabular/hypervolume.h"
#include "temper/tabular/pareto_q.h"
#include "temper/tabular/tracking.h"

namespace temper::app {
namespace {

using Rows = std::vector<std::vector<double>>;

Rows rows_of(const std::vector<double>& flat, int D) {
  Rows out;
  for (size_t k = 0; k < flat.size(); k += D) out.emplace_back(flat.begin() + k, flat.begin() + k + D);
  return out;
}

// Each learned point's tracked return (Pareto methods), else the point itself (the greedy rollout's return).
Rows tracked_returns(const tabular::TabularTrainer& t, const tabular::ProductMdp& p, const Rows& front,
                     int64_t max_steps) {
  const auto* q = dynamic_cast<const tabular::ParetoQ*>(&t.learner());
  if (!q) return front;
  Rows out;
  for (const std::vector<double>& v : front) {
    const std::vector<float> target(v.begin(), v.end());
    out.push_back(tabular::track(*q, p, target, max_steps).realised);
  }
  return out;
}

void print_table(const tabular::ProductMdp& p, const Rows& front, const Rows& tracked,
                 const std::vector<double>& truth) {
  std::printf("  %-28s %-28s %s\n", ("learned (" + join_words(p.objectives, ", ") + ")").c_str(), "tracked return",
              truth.empty() ? "" : "true point");
  for (size_t i = 0; i < front.size(); ++i) {
    std::string a, b;
    char buf[32];
    for (int d = 0; d < p.D; ++d) {
      std::snprintf(buf, sizeof buf, "%s%.6f", d ? " " : "", front[i][d]);
      a += buf;
      std::snprintf(buf, sizeof buf, "%s%.6f", d ? " " : "", tracked[i][d]);
      b += buf;
    }
    const char* match = "";
    if (!truth.empty())
      match = tabular::match_fronts(truth, front[i], p.D, tabular::kFrontTolerance).recovered ? "yes" : "no";
    std::printf("  %-28s %-28s %s\n", a.c_str(), b.c_str(), match);
  }
}

}  // namespace

int tabular_front(const TabularFrontOptions& o) {
  SideRunOptions so;
  so.resume = o.run;
  so.fallback = o.fallback;
  tabular::TabularConfig cfg;
  SideRun run("temper tabular front", so, "", [&](Recipe& r) { read_tabular_config(r, cfg); });
  const std::optional<SideCheckpoint> ck = run.open();
  TEMPER_CHECK(ck) << o.run << ": no checkpoint yet (the run stopped before its first)";
  const tabular::ProductMdp p = tabular::build_product(cfg);
  std::string note;
  const std::vector<double> truth = tabular_truth(p, cfg, &note);
  tabular::TabularTrainer t(p, cfg, truth);
  t.load(from_checkpoint(*ck));
  const std::vector<double> flat = t.front();
  const Rows front = rows_of(flat, p.D), tracked = tracked_returns(t, p, front, cfg.max_episode_steps);
  const double hv = tabular::hypervolume(std::span<const double>(flat), p.D, cfg.reference);
  const tabular::FrontMatch m = tabular::match_fronts(flat, truth, p.D, tabular::kFrontTolerance);
  const std::string method(enum_name(tabular::kMethodNames, cfg.method));
  if (o.json) {
    nlohmann::json j = {{"run", o.run},   {"step", ck->step},   {"method", method}, {"objectives", p.objectives},
                        {"front", front}, {"tracked", tracked}, {"hypervolume", hv}};
    if (!truth.empty()) {
      j["true_front"] = rows_of(truth, p.D);
      j["true_hypervolume"] = t.truth_hypervolume();
      j["recovered"] = m.recovered;
      j["missing"] = m.missing;
      j["spurious"] = m.spurious;
    }
    std::printf("%s\n", j.dump().c_str());
    return 0;
  }
  std::printf("%s: step %lld, %s on world %s, objectives %s\n", o.run.c_str(), static_cast<long long>(ck->step),
              method.c_str(), p.world.name.c_str(), join_words(p.objectives, ", ").c_str());
  std::printf("learned front at (start, %s): %zu points, hypervolume %.6g\n", p.state_name(p.u0).c_str(), front.size(),
              hv);
  print_table(p, front, tracked, truth);
  if (truth.empty()) {
    std::printf("true front: %s\n", note.c_str());
    return 0;
  }
  std::printf(
      "true front (set value iteration): %zu points, hypervolume %.6g; recovered %lld, missing %lld, "
      "spurious %lld\n",
      truth.size() / p.D, t.truth_hypervolume(), static_cast<long long>(m.recovered), static_cast<long long>(m.missing),
      static_cast<long long>(m.spurious));
  for (const std::vector<double>& v : rows_of(truth, p.D)) {
    std::string a;
    char buf[32];
    for (int d = 0; d < p.D; ++d) {
      std::snprintf(buf, sizeof buf, "%s%.6f", d ? " " : "", v[d]);
      a += buf;
    }
    std::printf("  %s\n", a.c_str());
  }
  return 0;
}

}  // namespace temper::app
