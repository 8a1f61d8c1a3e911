#include "temper/spotlight/planner.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "temper/core/error.h"

namespace temper::spotlight {

void PlannerConfig::visit(KeyVisitor& v) {
  v("group", group, "G: seeds each group keeps (the trainer's group size)");
  v("seeds_per_class", seeds_per_class, "candidate seeds scored at most per group");
  v("chunk", chunk, "seeds per exploration request");
  v("budget", budget, "requests per step (0: as many as the measured step time allows)");
  v("ucb_c", ucb_c, "the bandit's exploration weight");
  v.choice("cost", cost, "the bandit payoff's denominator: seconds of explorer time | seeds scored (deterministic)",
           {"seconds", "seeds"});
}

void PlannerConfig::validate() const {
  TEMPER_CHECK(group >= 2 && group <= 4096) << "flow.spotlight.group: expected 2..4096, got " << group;
  TEMPER_CHECK(seeds_per_class >= group && seeds_per_class <= 4096)
      << "flow.spotlight.seeds_per_class: expected group (" << group << ")..4096, got " << seeds_per_class;
  TEMPER_CHECK(chunk >= 1 && chunk <= seeds_per_class)
      << "flow.spotlight.chunk: expected 1..seeds_per_class, got " << chunk;
  TEMPER_CHECK(budget >= 0 && ucb_c >= 0)
      << "flow.spotlight.budget and ucb_c: expected >= 0, got " << budget << " and " << ucb_c;
  TEMPER_CHECK(cost == "seconds" || cost == "seeds")
      << "flow.spotlight.cost: expected \"seconds\" or \"seeds\", got '" << cost << "'";
}

uint64_t seed_id(int64_t step, int64_t group, int64_t j) {
  TEMPER_CHECK(step >= 0 && step < (int64_t{1} << 39) && group >= 0 && group < 4096 && j >= 0 && j < 4096)
      << "spotlight seed id: step " << step << ", group " << group << ", candidate " << j << " out of range";
  return (static_cast<uint64_t>(step) << 24) | (static_cast<uint64_t>(group) << 12) | static_cast<uint64_t>(j);
}

std::vector<size_t> select_spread(const std::vector<double>& rewards, int64_t G) {
  TEMPER_CHECK(G >= 1 && static_cast<int64_t>(rewards.size()) >= G)
      << "spotlight selection: " << G << " seeds from " << rewards.size() << " candidates";
  std::vector<size_t> order(rewards.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return rewards[a] < rewards[b]; });
  const auto low = static_cast<size_t>(G / 2), high = static_cast<size_t>(G) - low;
  std::vector<size_t> keep(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(low));
  keep.insert(keep.end(), order.end() - static_cast<std::ptrdiff_t>(high), order.end());
  return keep;
}

double population_std(const std::vector<double>& v) {
  if (v.empty()) return 0;
  double m = 0, q = 0;
  for (double x : v) m += x;
  m /= static_cast<double>(v.size());
  for (double x : v) q += (x - m) * (x - m);
  return std::sqrt(q / static_cast<double>(v.size()));
}

Planner::Planner(PlannerConfig c, int64_t classes) : cfg_(std::move(c)) {
  cfg_.validate();
  TEMPER_CHECK(classes >= 1) << "spotlight planner: " << classes << " classes";
  n_.assign(static_cast<size_t>(classes), 0);
  sum_.assign(static_cast<size_t>(classes), 0.0);
}

int64_t Planner::rounds() const {
  return (cfg_.seeds_per_class + cfg_.chunk - 1) / cfg_.chunk;
}

double Planner::index(int32_t label) const {
  const auto c = static_cast<size_t>(label);
  TEMPER_CHECK(c < n_.size()) << "spotlight planner: class " << label << " of " << n_.size();
  if (n_[c] == 0) return std::numeric_limits<double>::infinity();
  const int64_t total = std::accumulate(n_.begin(), n_.end(), int64_t{0});
  const double scale = std::accumulate(sum_.begin(), sum_.end(), 0.0) / static_cast<double>(total);
  return sum_[c] / static_cast<double>(n_[c]) +
         cfg_.ucb_c * std::abs(scale) *
             std::sqrt(2 * std::log(static_cast<double>(total)) / static_cast<double>(n_[c]));
}

std::vector<ExploreRequest> Planner::plan(int64_t step, const std::vector<int32_t>& labels, int64_t budget) const {
  const auto groups = static_cast<int64_t>(labels.size());
  std::vector<int64_t> order(static_cast<size_t>(groups));
  std::iota(order.begin(), order.end(), int64_t{0});
  std::vector<double> idx(static_cast<size_t>(groups));
  for (int64_t g = 0; g < groups; ++g) idx[static_cast<size_t>(g)] = index(labels[static_cast<size_t>(g)]);
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return idx[static_cast<size_t>(a)] > idx[static_cast<size_t>(b)]; });
  std::vector<ExploreRequest> out;
  const int64_t cap = budget > 0 ? budget : groups * rounds();
  for (int64_t r = 0; r < rounds(); ++r) {
    for (int64_t k = 0; k < groups; ++k) {
      if (static_cast<int64_t>(out.size()) >= cap) return out;
      const int64_t g = r == 0 ? k : order[static_cast<size_t>(k)];
      ExploreRequest q;
      q.step = step, q.group = g, q.label = labels[static_cast<size_t>(g)];
      q.first_seed = seed_id(step, g, r * cfg_.chunk);
      q.count = std::min(cfg_.chunk, cfg_.seeds_per_class - r * cfg_.chunk);
      out.push_back(q);
    }
  }
  return out;
}

void Planner::observe(int32_t label, double spread, double cost) {
  const auto c = static_cast<size_t>(label);
  TEMPER_CHECK(c < n_.size() && cost > 0) << "spotlight planner: class " << label << ", cost " << cost;
  ++n_[c];
  sum_[c] += spread / cost;
}

nlohmann::json Planner::state() const {
  return {{"plays", n_}, {"payoff_sum", sum_}};
}

void Planner::restore(const nlohmann::json& s) {
  const auto n = s.at("plays").get<std::vector<int64_t>>();
  const auto sum = s.at("payoff_sum").get<std::vector<double>>();
  TEMPER_CHECK(n.size() == n_.size() && sum.size() == n_.size())
      << "spotlight planner state: " << n.size() << " arms in the checkpoint, " << n_.size() << " classes in the run";
  n_ = n, sum_ = sum;
}

}  // namespace temper::spotlight
