#include "temper/rl/methods/fair.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "temper/core/error.h"
#include "temper/core/rng.h"
#include "temper/rl/derived_problem.h"
#include "temper/rl/method_spec.h"
#include "temper/rl/welfare.h"

namespace temper::rl {

void FairConfig::visit(KeyVisitor& v) {
  v("objectives", objectives,
    "comma list: correct, brevity, format, task:K or task:NAME (an entry of the task's reward vector)");
  v("ggf", ggf, "Gini weights, strictly decreasing (empty: linear)");
  v("preference", fixed, "a fixed trade-off for every group (empty: sampled per group on the simplex grid)");
  v("grid", grid, "preferences sampled on the simplex grid of step 1/grid");
  v("concentration", concentration, "Dirichlet concentrations of the sampled preferences (empty: uniform on the grid)");
  v("preferences_per_step", preferences_per_step, "K > 0: each step draws K preferences its groups take in turn");
  v("prefix", prefix,
    "written before each question, SFT prompts included: {p} = the preference, {w} = the group's Gini weights");
  v("sample_ggf", sample_ggf,
    "sample the Gini weights per group too (strictly decreasing on the grid), written into the prompt by {w}");
  v("welfare", welfare, "ggf or linear (the linear-scalarisation baseline)", kWelfareNames);
  v("sft_targets", sft_targets, "same, or preference (SFT targets cut to the answer line by the brevity weight)",
    kSftTargetsNames);
}

void FairConfig::validate() const {
  TEMPER_CHECK(objectives.size() >= 2) << "rl.fair.objectives: expected at least 2 objectives, got "
                                       << objectives.size();
  for (const std::string& o : objectives) {
    bool ok = o == "correct" || o == "brevity" || o == "format";
    if (o.rfind("task:", 0) == 0) {
      const std::string k = o.substr(5);
      ok = !k.empty() && (k.find_first_not_of("0123456789") == std::string::npos
                              ? k.size() < 4
                              : k.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789_") == std::string::npos);
    }
    TEMPER_CHECK(ok) << "rl.fair.objectives: expected correct, brevity, format, task:K (entry K of the task's reward "
                        "vector) or task:NAME (the entry the task names so), got '"
                     << o << "'";
  }
  if (!ggf.empty()) {
    TEMPER_CHECK(ggf.size() == objectives.size())
        << "rl.fair.ggf: " << ggf.size() << " weights for " << objectives.size() << " objectives";
    check_ggf_weights(ggf, "rl.fair.ggf");
  }
  if (!fixed.empty()) {
    TEMPER_CHECK(fixed.size() == objectives.size())
        << "rl.fair.preference: " << fixed.size() << " values for " << objectives.size() << " objectives";
    double s = 0;
    for (double x : fixed) {
      TEMPER_CHECK(x >= 0) << "rl.fair.preference: values must be >= 0, got " << x;
      s += x;
    }
    TEMPER_CHECK(std::fabs(s - 1) < 1e-6) << "rl.fair.preference: values must sum to 1, got " << s;
  }
  if (!concentration.empty()) {
    TEMPER_CHECK(concentration.size() == objectives.size())
        << "rl.fair.concentration: " << concentration.size() << " values for " << objectives.size() << " objectives";
    for (double a : concentration)
      TEMPER_CHECK(a > 0 && std::isfinite(a)) << "rl.fair.concentration: values must be > 0, got " << a;
    TEMPER_CHECK(fixed.empty()) << "rl.fair.concentration and rl.fair.preference: a fixed preference samples nothing";
  }
  TEMPER_CHECK(sft_targets == SftTargets::same ||
               std::find(objectives.begin(), objectives.end(), "brevity") != objectives.end())
      << "rl.fair.sft_targets = \"preference\" shortens SFT targets by the brevity weight: add brevity to "
         "rl.fair.objectives";
  TEMPER_CHECK(preferences_per_step >= 0)
      << "rl.fair.preferences_per_step must be >= 0 (0: one per group), got " << preferences_per_step;
  TEMPER_CHECK(preferences_per_step == 0 || fixed.empty())
      << "rl.fair.preferences_per_step and rl.fair.preference: a fixed preference samples nothing";
  TEMPER_CHECK(grid >= 1 && grid <= 1000) << "rl.fair.grid must be in [1, 1000], got " << grid;
  TEMPER_CHECK(prefix.find("{p}") != std::string::npos)
      << "rl.fair.prefix must contain {p} (the preference), got '" << prefix << "'";
  if (sample_ggf) {
    const int64_t D = static_cast<int64_t>(objectives.size());
    TEMPER_CHECK(ggf.empty()) << "rl.fair.sample_ggf and rl.fair.ggf: fixed Gini weights sample nothing (remove one)";
    TEMPER_CHECK(welfare == Welfare::ggf)
        << "rl.fair.sample_ggf needs welfare = \"ggf\" (the linear scalarisation has no Gini weights)";
    TEMPER_CHECK(prefix.find("{w}") != std::string::npos) << "rl.fair.sample_ggf: rl.fair.prefix must contain {w} (the "
                                                             "sampled Gini weights the policy is conditioned on), "
                                                             "e.g. \"<pref {p} ggf {w}>\\n\", got '"
                                                          << prefix << "'";
    TEMPER_CHECK(grid >= D * (D + 1) / 2) << "rl.fair.sample_ggf: strictly decreasing positive weights for " << D
                                          << " objectives need rl.fair.grid >= " << D * (D + 1) / 2 << ", got " << grid;
  }
}

namespace {
std::string numbers_text(const std::vector<double>& x) {
  std::string p;
  for (size_t j = 0; j < x.size(); ++j) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%s%.2f", j ? "," : "", x[j]);
    p += buf;
  }
  return p;
}
}  // namespace

std::string fair_preference_text(const std::string& prefix, const std::vector<double>& omega,
                                 const std::vector<double>& gini) {
  std::string s = prefix;
  const size_t at = s.find("{p}");
  if (at != std::string::npos) s.replace(at, 3, numbers_text(omega));
  const size_t wat = s.find("{w}");
  if (wat != std::string::npos)
    s.replace(wat, 3, numbers_text(gini.empty() ? ggf_weights(static_cast<int64_t>(omega.size()), "linear") : gini));
  return s;
}

tasks::Problem fair_condition(const tasks::Problem& p, const PromptCodec& codec, const std::string& prefix,
                              const std::vector<double>& omega, const std::vector<double>& gini) {
  const std::string pre = fair_preference_text(prefix, omega, gini);
  return derive_problem(p, codec, "rl.fair", [&](const std::string& question) { return pre + question; });
}

std::string fair_brief_solution(const std::string& gold) {
  const size_t at = gold.rfind("#### ");
  return at == std::string::npos ? gold : gold.substr(at);
}

tasks::Problem fair_sft_example(const tasks::Problem& problem, const PromptCodec& codec, const FairConfig& c,
                                const std::vector<double>& omega, uint64_t seed, uint64_t index,
                                const std::vector<double>& gini) {
  tasks::Problem p = fair_condition(problem, codec, c.prefix, omega, gini);
  if (c.sft_targets != SftTargets::preference) return p;
  const auto it = std::find(c.objectives.begin(), c.objectives.end(), "brevity");
  const double w = omega[static_cast<size_t>(it - c.objectives.begin())];
  Rng r(seed ^ 0xB1EFull, index);
  if (r.uniform_f64() < w) p.gold_solution = fair_brief_solution(p.gold_solution);
  return p;
}

Fair::Fair(FairConfig cfg) : cfg_(std::move(cfg)), obj_sum_(cfg_.objectives.size(), 0.0) {
  cfg_.validate();
  w_ = cfg_.ggf.empty() ? ggf_weights(static_cast<int64_t>(cfg_.objectives.size()), "linear") : cfg_.ggf;
}

void Fair::attach(const MethodEnv& env) {
  env_ = env;
}

std::vector<double> fair_sample_grid(int64_t D, int64_t grid, uint64_t seed, int64_t step, uint64_t position) {
  // Stars and bars: D-1 distinct bars among grid + D-1 slots, uniform over the grid points.
  const int64_t slots = grid + D - 1;
  Rng rng(mix_seed(mix_seed(seed ^ 0xFA1Eull, static_cast<uint64_t>(step)), position), 0);
  std::vector<int64_t> bars;
  while (static_cast<int64_t>(bars.size()) < D - 1) {
    int64_t b = static_cast<int64_t>(rng.next_u32() % static_cast<uint64_t>(slots));
    if (std::find(bars.begin(), bars.end(), b) == bars.end()) bars.push_back(b);
  }
  std::sort(bars.begin(), bars.end());
  std::vector<double> omega;
  int64_t prev = -1;
  for (int64_t b : bars) omega.push_back(static_cast<double>(b - prev - 1) / static_cast<double>(grid)), prev = b;
  omega.push_back(static_cast<double>(slots - prev - 1) / static_cast<double>(grid));
  return omega;
}

namespace {

// Gamma(alpha, 1): Marsaglia and Tsang (2000); alpha < 1 through Gamma(alpha + 1) * U^(1 / alpha).
double gamma_draw(Rng& r, double alpha) {
  if (alpha < 1) {
    const double u = std::max(r.uniform_f64(), 1e-300);
    return gamma_draw(r, alpha + 1) * std::pow(u, 1 / alpha);
  }
  const double d = alpha - 1.0 / 3, c = 1 / std::sqrt(9 * d);
  for (;;) {
    double x = 0, v = 0;
    do {
      x = r.normal();
      v = 1 + c * x;
    } while (v <= 0);
    v = v * v * v;
    const double u = r.uniform_f64();
    if (u < 1 - 0.0331 * x * x * x * x || std::log(std::max(u, 1e-300)) < 0.5 * x * x + d * (1 - v + std::log(v)))
      return d * v;
  }
}

}  // namespace

std::vector<double> fair_sample_dirichlet(const std::vector<double>& alpha, int64_t grid, uint64_t seed, int64_t step,
                                          uint64_t position) {
  Rng rng(mix_seed(mix_seed(seed ^ 0xD112ull, static_cast<uint64_t>(step)), position), 0);
  const size_t D = alpha.size();
  std::vector<double> g(D);
  double total = 0;
  for (size_t k = 0; k < D; ++k) total += g[k] = gamma_draw(rng, alpha[k]);
  if (!(total > 0)) g.assign(D, 1.0), total = static_cast<double>(D);  // every draw underflowed: the centre
  // Largest remainder: floor of each share in grid units, the units left to the largest fractions (lower index first).
  std::vector<int64_t> units(D);
  std::vector<std::pair<double, size_t>> frac(D);
  int64_t used = 0;
  for (size_t k = 0; k < D; ++k) {
    const double x = g[k] / total * static_cast<double>(grid);
    units[k] = std::min(grid, static_cast<int64_t>(std::floor(x)));
    used += units[k];
    frac[k] = {x - static_cast<double>(units[k]), k};
  }
  std::stable_sort(frac.begin(), frac.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  for (size_t i = 0; used < grid; ++i, ++used) ++units[frac[i % D].second];
  std::vector<double> omega(D);
  for (size_t k = 0; k < D; ++k) omega[k] = static_cast<double>(units[k]) / static_cast<double>(grid);
  return omega;
}

std::vector<double> fair_sample_ggf(int64_t D, int64_t grid, uint64_t seed, int64_t step, uint64_t position) {
  // k_i = m_i + (D - i) for i = 0..D-1, with m a partition of n = grid - D(D+1)/2 into at most D parts
  // (non-increasing, >= 0): a bijection with the strictly decreasing positive grid points. Partitions are drawn
  // uniformly from their counts: count(n, d) = count(n, d-1) [m_d = 0] + count(n-d, d) [every part >= 1].
  const int64_t n0 = grid - D * (D + 1) / 2;
  TEMPER_CHECK(D >= 1 && n0 >= 0) << "rl.fair.sample_ggf: " << D
                                  << " objectives need rl.fair.grid >= " << D * (D + 1) / 2 << ", got " << grid;
  std::vector<std::vector<double>> count(static_cast<size_t>(n0 + 1),
                                         std::vector<double>(static_cast<size_t>(D + 1), 0));
  for (int64_t n = 0; n <= n0; ++n)
    for (int64_t d = 0; d <= D; ++d) {
      double& c = count[static_cast<size_t>(n)][static_cast<size_t>(d)];
      if (n == 0)
        c = 1;
      else if (d > 0)
        c = count[static_cast<size_t>(n)][static_cast<size_t>(d - 1)] +
            (n >= d ? count[static_cast<size_t>(n - d)][static_cast<size_t>(d)] : 0);
    }
  Rng rng(mix_seed(mix_seed(seed ^ 0x6619ull, static_cast<uint64_t>(step)), position), 0);
  std::vector<int64_t> m(static_cast<size_t>(D), 0);
  int64_t n = n0, d = D;
  while (n > 0 && d > 0) {
    const double r = rng.uniform_f64() * count[static_cast<size_t>(n)][static_cast<size_t>(d)];
    if (r < count[static_cast<size_t>(n)][static_cast<size_t>(d - 1)]) {
      --d;
      continue;
    }
    for (int64_t i = 0; i < d; ++i) ++m[static_cast<size_t>(i)];
    n -= d;
  }
  std::vector<double> w(static_cast<size_t>(D));
  for (int64_t i = 0; i < D; ++i)
    w[static_cast<size_t>(i)] = static_cast<double>(m[static_cast<size_t>(i)] + D - i) / static_cast<double>(grid);
  return w;
}

std::vector<double> Fair::sample_gini(int64_t step, uint64_t position) const {
  if (!cfg_.sample_ggf) return w_;
  return fair_sample_ggf(static_cast<int64_t>(cfg_.objectives.size()), cfg_.grid, env_.seed, step, position);
}

std::vector<double> Fair::sample_preference(int64_t step, uint64_t position) const {
  if (!cfg_.fixed.empty()) return cfg_.fixed;
  if (!cfg_.concentration.empty())
    return fair_sample_dirichlet(cfg_.concentration, cfg_.grid, env_.seed, step, position);
  return fair_sample_grid(static_cast<int64_t>(cfg_.objectives.size()), cfg_.grid, env_.seed, step, position);
}

void Fair::prepare_problems(std::vector<tasks::Problem>& problems, size_t first, int64_t step, int64_t round) {
  if (round == 0) {
    omega_.clear();
    gini_.clear();
    obj_sum_.assign(cfg_.objectives.size(), 0.0);
    welfare_sum_ = gini_first_sum_ = 0, obj_n_ = 0, groups_ = 0;
  }
  const uint64_t K = static_cast<uint64_t>(cfg_.preferences_per_step);
  for (size_t i = first; i < problems.size(); ++i) {
    std::vector<double> omega = sample_preference(step, K ? i % K : i);
    std::vector<double> w = sample_gini(step, K ? i % K : i);
    problems[i] = fair_condition(problems[i], *env_.codec, cfg_.prefix, omega, w);
    omega_[i] = std::move(omega);
    gini_[i] = std::move(w);
  }
}

size_t task_objective_index(const std::string& objective, const tasks::Task* task) {
  const std::string k = objective.substr(5);
  if (!k.empty() && k.find_first_not_of("0123456789") == std::string::npos) return std::stoul(k);
  const std::vector<std::string> names = task ? task->reward_names() : std::vector<std::string>{};
  const auto it = std::find(names.begin(), names.end(), k);
  if (it != names.end()) return static_cast<size_t>(it - names.begin());
  std::string known;
  for (const std::string& n : names) known += (known.empty() ? "" : ", ") + n;
  TEMPER_FAIL() << "objective " << objective << ": the task" << (task ? " '" + task->name() + "'" : std::string())
                << (names.empty() ? " names no reward entries (use task:K, K the entry's index)"
                                  : " names its reward entries " + known);
}

void check_objectives(const std::vector<std::string>& objectives, const tasks::Task& task) {
  for (const std::string& o : objectives)
    if (o.rfind("task:", 0) == 0) task_objective_index(o, &task);
}

std::vector<double> fair_objectives(const std::vector<std::string>& names, bool correct, int64_t tokens,
                                    int64_t max_new, const std::string& text, const tasks::Task* task,
                                    const std::vector<double>& task_rewards) {
  std::vector<double> r;
  for (const std::string& o : names) {
    if (o == "correct")
      r.push_back(correct ? 1.0 : 0.0);
    else if (o == "brevity")
      r.push_back(
          std::max(0.0, 1.0 - static_cast<double>(tokens) / static_cast<double>(std::max<int64_t>(1, max_new))));
    else if (o == "format")
      r.push_back(task && task->extract_answer(text) ? 1.0 : 0.0);
    else {
      const size_t k = task_objective_index(o, task);
      TEMPER_CHECK(k < task_rewards.size())
          << "fair: objective " << o << " but the task's reward vector has " << task_rewards.size() << " entries";
      r.push_back(task_rewards[k]);
    }
  }
  return r;
}

std::vector<double> Fair::objectives(const Trajectory& t) const {
  return fair_objectives(cfg_.objectives, t.correct, static_cast<int64_t>(t.tokens.size()), env_.max_new, t.text,
                         env_.task.get(), t.rewards);
}

void Fair::after_reward(Batch& b) {
  const size_t D = cfg_.objectives.size();
  std::map<int64_t, std::vector<size_t>> groups;
  for (size_t i = 0; i < b.traj.size(); ++i) groups[b.traj[i].group].push_back(i);
  for (auto& [g, members] : groups) {
    const size_t problem = static_cast<size_t>(b.traj[members[0]].problem);
    auto it = omega_.find(problem);
    TEMPER_CHECK(it != omega_.end()) << "rl.fair: group " << g << " has no preference";
    const std::vector<double>& omega = it->second;
    const auto wit = gini_.find(problem);
    const std::vector<double>& w = wit != gini_.end() ? wit->second : w_;
    std::vector<std::vector<double>> r;
    std::vector<double> m(D, 0.0);
    for (size_t i : members) {
      r.push_back(objectives(b.traj[i]));
      for (size_t j = 0; j < D; ++j) m[j] += r.back()[j] / static_cast<double>(members.size());
    }
    std::vector<double> wm(D);
    for (size_t j = 0; j < D; ++j) wm[j] = omega[j] * m[j];
    // d GGF(omega * m) / d m = omega * lambda; the linear scalarisation: lambda = 1.
    const std::vector<double> lambda =
        cfg_.welfare == Welfare::ggf ? ggf_supergradient(w, wm) : std::vector<double>(D, 1.0);
    for (size_t k = 0; k < members.size(); ++k) {
      Trajectory& t = b.traj[members[k]];
      double s = 0;
      for (size_t j = 0; j < D; ++j) s += omega[j] * lambda[j] * r[k][j];
      t.reward = s;
      t.rewards = r[k];
      if (cfg_.preferences_per_step > 0)
        t.stratum = static_cast<int64_t>(problem % static_cast<size_t>(cfg_.preferences_per_step));
      if (t.lineage.parent < 0 && !t.lineage.off_policy) {
        for (size_t j = 0; j < D; ++j) obj_sum_[j] += r[k][j];
        ++obj_n_;
      }
    }
    welfare_sum_ += ggf(w, wm);  // reported as GGF for both (the measure the experiment compares)
    gini_first_sum_ += w[0];
    ++groups_;
  }
}

std::string fair_metric_name(std::string objective) {
  std::replace(objective.begin(), objective.end(), ':', '_');
  return objective;
}

void Fair::metrics(Metrics& out) const {
  for (size_t j = 0; j < cfg_.objectives.size(); ++j)
    out.emplace_back("fair_" + fair_metric_name(cfg_.objectives[j]),
                     obj_n_ ? obj_sum_[j] / static_cast<double>(obj_n_) : 0.0);
  out.emplace_back("fair_welfare", groups_ ? welfare_sum_ / static_cast<double>(groups_) : 0.0);
  // The mean weight of the worst-off objective over the step's groups (constant unless sample_ggf).
  out.emplace_back("fair_gini_first", groups_ ? gini_first_sum_ / static_cast<double>(groups_) : 0.0);
}

namespace {
class FairSetup final : public MethodSetupOf<FairConfig> {
  // Evaluation measures the objectives at the balanced (or the fixed) preference (temper eval --preference for
  // others); SFT prompts carry sampled preferences too, and with sft_targets = "preference" the targets follow them.
  void configure(RunSettings& run) const override {
    const FairConfig f = cfg;
    run.eval.objectives = f.objectives;
    if (!f.fixed.empty())
      run.eval.preference = f.fixed;
    else
      run.eval.preference.assign(f.objectives.size(), 1.0 / static_cast<double>(f.objectives.size()));
    run.eval.preference_prefix = f.prefix;
    run.eval.ggf = f.ggf;  // sampled Gini weights: evaluated at the linear ones ({w} in the prompt too)
    run.sft.condition = [f, seed = run.seed](tasks::Problem p, uint64_t i, const PromptCodec& codec) {
      const int64_t D = static_cast<int64_t>(f.objectives.size());
      std::vector<double> w = f.fixed.empty() ? fair_sample_grid(D, f.grid, seed ^ 0x5F7ull, 0, i) : f.fixed;
      std::vector<double> gini = f.sample_ggf ? fair_sample_ggf(D, f.grid, seed ^ 0x5F7ull, 0, i) : f.ggf;
      return fair_sft_example(p, codec, f, w, seed, i, gini);
    };
  }
  void check_task(const tasks::Task& task) const override {
    try {
      check_objectives(cfg.objectives, task);
    } catch (const Error& e) {
      TEMPER_FAIL() << "rl.fair.objectives: " << e.what();
    }
  }
  MethodEffects effects() const override {
    MethodEffects e;
    e.combines_rewards = true;
    e.rewrites_rewards = true;
    return e;
  }
  std::unique_ptr<Method> make(const MethodDeps&) const override { return std::make_unique<Fair>(cfg); }
};
}  // namespace

const MethodSpec kFairMethod{"fair", "rl.fair", 10, "fair multi-objective RL (generalized Gini welfare)",
                             []() -> std::unique_ptr<MethodSetup> { return std::make_unique<FairSetup>(); }};

}  // namespace temper::rl
