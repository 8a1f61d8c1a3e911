// Spotlight's planner (spec methods-other section 3, steps 3-4; the bandit's form is our reading, the paper's
// was not visible): which candidate seeds explorers score for a step's groups, and which G a group keeps.
//  - Seeds: candidate j of group g at step s is seed id (s << 24) | (g << 12) | j (j < 4096, g < 4096); the
//    noise of a seed is a function of (run seed, class label, seed id) (seeded_sampler.h). With no exploration
//    a group takes candidates 0..G-1: the synchronous baseline's random seeds.
//  - Requests: chunk 0 of every group first, then the further chunks (up to seeds_per_class candidates a group)
//    round by round, groups in the order of their class's UCB index, cut at the step's budget of requests. The
//    pull queue takes them in this order, so when explorers are short of time the best arms get the extra seeds.
//  - Bandit: arms = class labels; payoff of a group = the reward spread (std) of its selected G per unit of
//    explorer cost (seconds, or seeds scored when cost = "seeds": deterministic); UCB1 index
//    mean + c * scale * sqrt(2 ln N / n) with scale = the mean payoff over all arms (c is unit-free).
//  - Selection: the G/2 lowest and G/2 highest rewards (G odd: one more from the top): maximal spread.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "temper/core/settings.h"
#include "temper/spotlight/work_queue.h"

namespace temper::spotlight {

struct PlannerConfig {
  int64_t group = 8;             // G: seeds a group keeps (the trainer's group size)
  int64_t seeds_per_class = 32;  // candidates scored at most per group (>= group)
  int64_t chunk = 8;             // seeds per request
  int64_t budget = 0;            // requests per step (0: as many as the measured step time allows)
  double ucb_c = 1.0;
  std::string cost = "seconds";  // the payoff's denominator: seconds | seeds
  void validate() const;
  void visit(KeyVisitor& v);
};

uint64_t seed_id(int64_t step, int64_t group, int64_t j);

// Indices into `rewards` of the G kept: the G/2 lowest, then the highest (ties broken by index).
std::vector<size_t> select_spread(const std::vector<double>& rewards, int64_t G);
double population_std(const std::vector<double>& v);

class Planner {
 public:
  Planner(PlannerConfig c, int64_t classes);
  const PlannerConfig& config() const { return cfg_; }
  int64_t rounds() const;  // chunks a group gets at most
  // The requests for `step` whose groups have these labels, in priority order, at most `budget` of them
  // (<= 0: all rounds).
  std::vector<ExploreRequest> plan(int64_t step, const std::vector<int32_t>& labels, int64_t budget) const;
  // A group of class `label` kept seeds whose rewards (under the explorers' weights) spread by `spread`, at
  // explorer cost `cost`.
  void observe(int32_t label, double spread, double cost);
  double index(int32_t label) const;  // the UCB index (+inf for an arm never played)
  int64_t plays(int32_t label) const { return n_[static_cast<size_t>(label)]; }
  nlohmann::json state() const;  // the bandit's counts and sums (checkpoints)
  void restore(const nlohmann::json& s);

 private:
  PlannerConfig cfg_;
  std::vector<int64_t> n_;
  std::vector<double> sum_;
};

}  // namespace temper::spotlight
