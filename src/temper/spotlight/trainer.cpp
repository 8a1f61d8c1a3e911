#include "temper/spotlight/trainer.h"

#include <signal.h>

#include <algorithm>
#include <cmath>

#include "temper/core/error.h"
#include "temper/core/rng.h"
#include "temper/flow/flow_grpo.h"
#include "temper/spotlight/seeded_sampler.h"

namespace temper::spotlight {

SpotlightTrainer::SpotlightTrainer(flow::VelocityModel& policy, flow::VelocityModel& base, RewardFn reward,
                                   LabelFn labels, flow::DgRlConfig rl, SpotlightConfig sc, int64_t classes)
    : policy_(policy),
      base_(base),
      reward_(std::move(reward)),
      labels_(std::move(labels)),
      rl_(std::move(rl)),
      sc_(std::move(sc)),
      opt_(policy.param_count()),
      store_(sc_.max_staleness),
      planner_(sc_.planner, classes) {
  sc_.validate();
  TEMPER_CHECK(rl_.grpo.group == sc_.planner.group)
      << "spotlight: rl.grpo.group (" << rl_.grpo.group << ") differs from flow.spotlight.group (" << sc_.planner.group
      << ")";
  opt_.cfg.weight_decay = static_cast<float>(rl_.weight_decay);
  store_.push(0, policy_.params());
  if (!sc_.replay.empty()) replay_ = read_schedule(sc_.replay);
}

SpotlightTrainer::~SpotlightTrainer() {
  finish();
}

void SpotlightTrainer::finish() {
  if (pool_) pool_->stop();
}

void SpotlightTrainer::start_explorers(ExplorerCommand cmd) {
  if (sc_.explorers == 0 || !sc_.replay.empty()) return;
  pool_ = std::make_unique<ExplorerPool>(queue_, std::move(cmd));
  pool_->set_respawn(sc_.respawn_delay_s >= 0, std::max(sc_.respawn_delay_s, 0.0));
  pool_->set_preemption(sc_.preempt_every_s, mix_seed(static_cast<uint64_t>(rl_.seed), 0x9e3));
  const int64_t v = store_.explorer_version();
  pool_->set_weights(v, store_.get(v));
  for (int64_t i = 0; i < sc_.explorers; ++i) pool_->spawn();
}

flow::Metrics SpotlightTrainer::step(int64_t s) {
  StepTrace t;
  t.step = s, t.version = store_.current(), t.begin = queue_.now();
  TEMPER_CHECK(store_.current() == s - 1)
      << "spotlight: step " << s << " with weights version " << store_.current() << " (expected " << s - 1 << ")";
  const std::vector<int32_t> labels = labels_(s);
  if (!replay_.empty()) {
    auto it = replay_.find(s);
    TEMPER_CHECK(it != replay_.end()) << sc_.replay << ": no line for step " << s << " (flow.spotlight.replay)";
    groups_ = it->second;
  } else {
    t.results = queue_.take(s);
    groups_ = choose(s, labels, t.results);
  }
  if (pool_) {
    explore_next(s);
    if (std::find(sc_.kill_steps.begin(), sc_.kill_steps.end(), s) != sc_.kill_steps.end()) pool_->kill_busy(5.0);
  }
  t.train_begin = queue_.now();
  flow::Metrics m = train();
  t.train_end = queue_.now();
  store_.push(s, policy_.params());
  if (pool_ && sc_.barrier) {
    TEMPER_CHECK(queue_.wait_step_done(s + 1, sc_.barrier_timeout_s))
        << "spotlight: step " << s + 1
        << "'s exploration did not finish within flow.spotlight.barrier_timeout_s = " << sc_.barrier_timeout_s << " s ("
        << pool_->alive() << " explorers alive)";
  }
  t.end = queue_.now();
  const double train_s = t.train_end - t.train_begin, step_s = t.end - t.begin;
  step_s_ema_ = step_s_ema_ > 0 ? 0.8 * step_s_ema_ + 0.2 * step_s : step_s;
  m.emplace_back("train_s", train_s);
  m.emplace_back("step_s", step_s);
  add_explore_metrics(t.results, m);
  trace_.push_back(std::move(t));
  return m;
}

std::vector<GroupPlan> SpotlightTrainer::choose(int64_t s, const std::vector<int32_t>& labels,
                                                std::vector<ExploreResult>& results) {
  const int64_t G = sc_.planner.group, groups = static_cast<int64_t>(labels.size());
  std::vector<std::vector<std::pair<uint64_t, double>>> cand(static_cast<size_t>(groups));
  std::vector<GroupPlan> out(static_cast<size_t>(groups));
  for (const ExploreResult& r : results) {
    if (r.group < 0 || r.group >= groups || r.label != labels[static_cast<size_t>(r.group)]) continue;
    GroupPlan& p = out[static_cast<size_t>(r.group)];
    for (size_t i = 0; i < r.seeds.size(); ++i)
      cand[static_cast<size_t>(r.group)].emplace_back(r.seeds[i], r.rewards[i]);
    p.cost += sc_.planner.cost == "seeds" ? static_cast<double>(r.seeds.size()) : r.seconds;
    p.version = std::max(p.version, r.version);
    request_s_ema_ = request_s_ema_ > 0 ? 0.9 * request_s_ema_ + 0.1 * r.seconds : r.seconds;
  }
  for (int64_t g = 0; g < groups; ++g) {
    GroupPlan& p = out[static_cast<size_t>(g)];
    auto& c = cand[static_cast<size_t>(g)];
    p.label = labels[static_cast<size_t>(g)];
    p.candidates = static_cast<int64_t>(c.size());
    if (p.candidates < G) {  // exploration missing: the first G candidates (random seeds)
      for (int64_t j = 0; j < G; ++j) p.seeds.push_back(seed_id(s, g, j));
      continue;
    }
    std::sort(c.begin(), c.end());  // by seed id: the choice does not depend on arrival order
    std::vector<double> r;
    for (const auto& e : c) r.push_back(e.second);
    std::vector<double> kept, first(r.begin(), r.begin() + static_cast<std::ptrdiff_t>(G));
    for (size_t i : select_spread(r, G)) p.seeds.push_back(c[i].first), kept.push_back(r[i]);
    p.explored = true;
    p.selected_std = population_std(kept);
    p.random_std = population_std(first);
    planner_.observe(p.label, p.selected_std, std::max(p.cost, 1e-9));
  }
  return out;
}

int64_t SpotlightTrainer::budget() const {
  if (sc_.planner.budget > 0 || sc_.barrier || request_s_ema_ <= 0 || step_s_ema_ <= 0) return sc_.planner.budget;
  const auto groups = rl_.grpo.groups;
  const double n = std::ceil(std::max(pool_->alive(), 1) * step_s_ema_ / request_s_ema_);
  return std::max<int64_t>(groups, static_cast<int64_t>(std::min(n, 1e9)));
}

void SpotlightTrainer::explore_next(int64_t s) {
  const int64_t v = store_.explorer_version();
  pool_->set_weights(v, store_.get(v));
  queue_.add(planner_.plan(s + 1, labels_(s + 1), budget()));
  pool_->notify();
}

flow::Metrics SpotlightTrainer::train() {
  const int64_t G = sc_.planner.group, groups = static_cast<int64_t>(groups_.size()), B = G * groups;
  std::vector<int32_t> y(static_cast<size_t>(B));
  std::vector<uint64_t> key(static_cast<size_t>(B)), stream(static_cast<size_t>(B));
  for (int64_t i = 0; i < B; ++i) {
    const GroupPlan& p = groups_[static_cast<size_t>(i / G)];
    TEMPER_CHECK(static_cast<int64_t>(p.seeds.size()) == G)
        << "spotlight: a group of " << p.seeds.size() << " seeds, expected " << G;
    y[static_cast<size_t>(i)] = p.label;
    key[static_cast<size_t>(i)] = seed_key(static_cast<uint64_t>(rl_.seed), p.label);
    stream[static_cast<size_t>(i)] = p.seeds[static_cast<size_t>(i % G)];
  }
  const flow::SdeTrajectory tr = flow::sample_sde_rows(policy_, y.data(), key.data(), stream.data(), B, rl_.sde);
  const std::vector<float> x(tr.sample(), tr.sample() + B * policy_.dim());
  const std::vector<double> r = reward_(x, y);
  grad_.assign(static_cast<size_t>(policy_.param_count()), 0.f);
  const flow::FlowGrpoStats st = flow::flow_grpo_grad(policy_, base_, rl_.sde, tr, r, rl_.beta, rl_.grpo, grad_.data());
  const double norm = opt_.update(policy_.params().data(), grad_.data(), static_cast<float>(rl_.lr), rl_.max_grad_norm);
  double group_std = 0, sel = 0, rnd = 0;
  int64_t explored = 0;
  for (int64_t g = 0; g < groups; ++g) {
    group_std += population_std(std::vector<double>(r.begin() + g * G, r.begin() + (g + 1) * G));
    const GroupPlan& p = groups_[static_cast<size_t>(g)];
    if (p.explored) ++explored, sel += p.selected_std, rnd += p.random_std;
  }
  const double e = static_cast<double>(std::max<int64_t>(explored, 1));
  return {{"reward", st.reward},
          {"kl", st.kl},
          {"objective", st.objective},
          {"loss", st.loss},
          {"grad_norm", norm},
          {"group_std", group_std / static_cast<double>(groups)},
          {"explored_groups", static_cast<double>(explored)},
          {"selected_std", sel / e},
          {"random_std", rnd / e}};
}

void SpotlightTrainer::add_explore_metrics(const std::vector<ExploreResult>& results, flow::Metrics& m) const {
  double lag = 0, candidates = 0;
  for (const ExploreResult& r : results)
    lag += static_cast<double>(store_.current() - 1 - r.version), candidates += static_cast<double>(r.seeds.size());
  m.emplace_back("explore_candidates", candidates);
  m.emplace_back("version_lag", results.empty() ? 0.0 : lag / static_cast<double>(results.size()));
  const QueueCounters q = queue_.counters();
  m.emplace_back("requeued", static_cast<double>(q.requeued));
  m.emplace_back("dropped", static_cast<double>(q.dropped));
  m.emplace_back("expired", static_cast<double>(q.expired));
  m.emplace_back("late", static_cast<double>(q.late));
  if (!pool_) return;
  const PoolStats p = pool_->stats();
  m.emplace_back("explorers_alive", static_cast<double>(pool_->alive()));
  m.emplace_back("explorer_deaths", static_cast<double>(p.deaths));
  m.emplace_back("explorer_seconds", p.explorer_seconds);
  m.emplace_back("lost_seconds", p.lost_seconds);
  for (auto it = p.joins.rbegin(); it != p.joins.rend(); ++it)
    if (it->ready >= 0) {
      m.emplace_back("join_s", it->ready - it->spawned);
      break;
    }
}

}  // namespace temper::spotlight
