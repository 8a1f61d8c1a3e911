// Fair multi-objective RL (Siddique et al. 2026, arXiv 2606.18111; ../shared/specs/methods-other.md
// section 6), train once and choose the trade-off at deployment. Each rollout gets a vector of D
// objectives; each group samples a preference omega written into its prompt, and each rollout's scalar
// GRPO reward is the supergradient of the group's Gini welfare (rl/welfare.h) applied to its own vector.
// With sample_ggf the Gini weights are sampled per group too and written beside it ({w} in the prefix), so one
// run learns every (preference, welfare) pair (spec's recommendation: condition on (w, omega)).
// The preference grid, the welfare, the reward and the objectives: above Fair.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "temper/rl/method.h"

namespace temper::rl {

struct MethodSpec;

enum class Welfare { ggf, linear };  // GGF_w, or the linear-scalarisation baseline (reward = omega . r)
inline constexpr EnumNames<Welfare, 2> kWelfareNames{{{Welfare::ggf, "ggf"}, {Welfare::linear, "linear"}}};
enum class SftTargets { same, preference };
inline constexpr EnumNames<SftTargets, 2> kSftTargetsNames{
    {{SftTargets::same, "same"}, {SftTargets::preference, "preference"}}};

struct FairConfig {
  std::vector<std::string> objectives = {"correct", "brevity"};
  std::vector<double> ggf;    // Gini weights, strictly decreasing; empty: linear for D objectives
  std::vector<double> fixed;  // a fixed preference for every group (the linear-scalarisation baseline); empty: sample
  int64_t grid = 20;          // preferences sampled on the simplex grid of step 1/grid
  // How the RL groups' preferences are drawn: empty, uniformly over the grid points; else a Dirichlet
  // with these concentrations (one per objective, > 0) rounded to the grid by largest remainder, to
  // sample one end of the trade-off more often (e.g. {2, 0.5}: 40% of groups with a brevity weight of
  // 0 or 0.05, against 10% uniformly). SFT prompts keep the uniform grid.
  std::vector<double> concentration;
  // 0: every group draws its own preference. K > 0: each step draws K preferences and its groups take them in
  // turn (group i the (i mod K)-th), and the batch-level reward scales (rl.scale_rewards = "batch",
  // "batch_active") pool their std over the groups of one preference only: with one std for the whole batch,
  // the groups whose preference weighs a small-spread objective (brevity) get steps scaled by the other
  // groups' spread (correctness) and barely move.
  int64_t preferences_per_step = 0;
  // Written before the question; {p} = the preference, {w} = the group's Gini weights (2 decimals, comma separated).
  std::string prefix = "<pref {p}>\n";
  // Sample the Gini weights per group as well (strictly decreasing, positive, uniform over the points of the grid of
  // step 1/grid; the same position as the group's preference), written into the prompt through {w}: the policy is
  // conditioned on both and either can be chosen at deployment (temper eval --preference ... --ggf ...).
  bool sample_ggf = false;
  Welfare welfare = Welfare::ggf;
  // SFT targets: "same" (the gold solution whatever the preference) or "preference" (with the brevity
  // objective: the answer line alone with probability = the brevity weight, else the whole solution,
  // so the SFT policy already maps the preference in its prompt to a point of the trade-off).
  SftTargets sft_targets = SftTargets::same;
  void validate() const;
  void visit(KeyVisitor& v);  // its recipe section's keys
};

// The prompt text of a preference: prefix with {p} replaced by the preference and {w} by the Gini weights (empty:
// the linear weights for omega's D, the welfare's default).
std::string fair_preference_text(const std::string& prefix, const std::vector<double>& omega,
                                 const std::vector<double>& gini = {});
// A problem conditioned on a preference (and Gini weights): the prefix before the question as the model is asked
// it, in `asked` (and the last user message of a chat problem); `prompt` stays the question (rl/derived_problem.h).
tasks::Problem fair_condition(const tasks::Problem& p, const PromptCodec& codec, const std::string& prefix,
                              const std::vector<double>& omega, const std::vector<double>& gini = {});
// The SFT example for a preference (sft_targets "preference"): the prompt conditioned as above, and with
// probability omega[brevity] (a deterministic draw from seed and index) the gold solution cut to its
// final "#### answer" line.
tasks::Problem fair_sft_example(const tasks::Problem& p, const PromptCodec& codec, const FairConfig& c,
                                const std::vector<double>& omega, uint64_t seed, uint64_t index,
                                const std::vector<double>& gini = {});
// The last "#### ..." line of a gold solution (the whole text when it has none).
std::string fair_brief_solution(const std::string& gold);

// A preference uniform over the points of the D-simplex grid of step 1/grid, deterministic in
// (seed, step, position).
std::vector<double> fair_sample_grid(int64_t D, int64_t grid, uint64_t seed, int64_t step, uint64_t position);
// A Dirichlet(alpha) draw rounded to the simplex grid of step 1/grid (largest remainder), from the
// same (seed, step, position) stream.
std::vector<double> fair_sample_dirichlet(const std::vector<double>& alpha, int64_t grid, uint64_t seed, int64_t step,
                                          uint64_t position);

// Gini weights for D objectives uniform over the strictly decreasing positive points of the simplex grid of step
// 1/grid (k_1 > ... > k_D >= 1, sum grid; the spec's "uniform on the simplex, sorted decreasing" on the grid),
// deterministic in (seed, step, position); needs grid >= D(D+1)/2. D = 2, grid 20: (0.55, 0.45) .. (0.95, 0.05).
std::vector<double> fair_sample_ggf(int64_t D, int64_t grid, uint64_t seed, int64_t step, uint64_t position);

// The objective vector of one completion (names as FairConfig::objectives).
std::vector<double> fair_objectives(const std::vector<std::string>& names, bool correct, int64_t tokens,
                                    int64_t max_new, const std::string& text, const tasks::Task* task,
                                    const std::vector<double>& task_rewards);

// The entry of the task's reward vector an objective "task:K" or "task:NAME" reads (NAME among task->reward_names();
// an unknown name is an error listing them).
size_t task_objective_index(const std::string& objective, const tasks::Task* task);
// Every task:NAME objective names an entry of the task's reward vector (else the error above).
void check_objectives(const std::vector<std::string>& objectives, const tasks::Task& task);

// The metric suffix of an objective ("task:0" -> "task_0").
std::string fair_metric_name(std::string objective);

// Each rollout gets a vector of D objectives; each group samples a preference omega (importance per
// objective, on the simplex grid of step 1/20, extremes included) written into its prompt
// ("<pref 0.25,0.75>\n" before the question); the welfare of the group is GGF_w(omega * m) with m the
// group's mean objective vector and w fixed decreasing Gini weights; each rollout's scalar GRPO reward is
// the supergradient there applied to its own vector: reward_i = sum_j omega_j w_(rank of omega_j m_j) r_ij
// (the spec's design: GGF on the expected return, not per sample, which would bias toward risk aversion).
// With sample_ggf each group draws its Gini weights w too (fair_sample_ggf), written into its prompt beside omega
// ({w}), and its rewards and welfare use them.
// Objectives: correct (the verdict), brevity (1 - tokens / max_new), format (an answer line the task
// can read), task:K (entry K of the task's reward vector) or task:NAME (the entry Task::reward_names calls NAME).
class Fair : public Method {
 public:
  explicit Fair(FairConfig cfg);
  std::string name() const override { return "fair"; }
  void attach(const MethodEnv& env) override;
  void prepare_problems(std::vector<tasks::Problem>& problems, size_t first, int64_t step, int64_t round) override;
  void after_reward(Batch& b) override;
  void metrics(Metrics& m) const override;
  // The objective vector of one rollout.
  std::vector<double> objectives(const Trajectory& t) const;
  // The preference a group of the step draws (deterministic in seed, step and position).
  std::vector<double> sample_preference(int64_t step, uint64_t position) const;
  // The Gini weights of that group: sampled with sample_ggf, else the fixed ones (gini()).
  std::vector<double> sample_gini(int64_t step, uint64_t position) const;
  const std::vector<double>& gini() const { return w_; }

 private:
  FairConfig cfg_;
  std::vector<double> w_;
  MethodEnv env_;
  std::map<size_t, std::vector<double>> omega_;  // batch problem index -> its preference (this step)
  std::map<size_t, std::vector<double>> gini_;   // batch problem index -> its Gini weights (this step)
  std::vector<double> obj_sum_;
  double welfare_sum_ = 0, gini_first_sum_ = 0;
  int64_t obj_n_ = 0, groups_ = 0;
};

// The method's entry in the table of methods (rl/methods/registry.cpp).
extern const MethodSpec kFairMethod;

}  // namespace temper::rl
