// GraphPO (spec methods-llm-rl section 6): the graph advantage of rl/state_graph.h over each group's rollouts, a
// step ending where the task's state extractor reports a new state. By default the rollout expands step-wise: a
// state the group reached before stops the later sequence there and its budget goes to a new state (`expansion`,
// `expand_budget`, `reallocate`); `expansion = "after"` merges independent rollouts after the fact. Free text
// (datasets) merges lines by embedding (`equivalence`), after the fact. The spec's variance measure (per-edge
// advantage variance across independent samplings) is logged. In detail: above GraphPo.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>

#include "temper/rl/method.h"
#include "temper/rl/state_graph.h"

namespace temper::rl {

struct MethodSpec;

// A completion's steps (text, state key, tokens) and, per token, its step.
std::vector<GraphStep> segment_steps(const tasks::Task& task, const tasks::Problem& p, const PromptCodec& codec,
                                     const std::vector<int32_t>& tokens, std::vector<int64_t>* step_of_token);

// The expansion budget during rollout: a sequence that completes a line reaching a state that `budget`
// sequences of its group already continued from is stopped there; its suffix is the others' (its reward is
// estimated from the paths through that state after scoring).
class GraphPoHook : public rollout::RolloutHook {
 public:
  void reset(const MethodEnv* env, const RolloutRound& round, int64_t budget, bool reallocate = false);
  rollout::HookDecision after_token(const rollout::RolloutRequest& q, const rollout::Completion& c) override;
  // (problem index, member) -> the state it stopped at
  const std::map<std::pair<int64_t, int64_t>, std::string>& stopped() const { return stopped_; }

 private:
  const MethodEnv* env_ = nullptr;
  RolloutRound round_;
  int64_t budget_ = 0;
  bool reallocate_ = false;
  std::map<int64_t, int64_t> credit_;                            // problem -> forks earned by stopped sequences
  std::map<std::pair<int64_t, int64_t>, size_t> known_;          // states seen so far per sequence
  std::map<std::pair<int64_t, std::string>, int64_t> expanded_;  // (problem, state) -> sequences continuing from it
  std::map<std::pair<int64_t, int64_t>, std::string> stopped_;
};

// A completion cut at every line end (the rest is the step to the leaf); states left empty.
std::vector<GraphStep> segment_lines(const PromptCodec& codec, const std::vector<int32_t>& tokens,
                                     std::vector<int64_t>* step_of_token);
// Greedy cosine clustering: ids[i] = the first earlier founder j with cos(v_i, v_j) >= threshold, else a new
// cluster founded by i. Zero vectors only match zero vectors.
std::vector<int64_t> cosine_clusters(const std::vector<std::vector<float>>& v, double threshold);

// The spec's variance measure: how much an edge's advantage estimate moves between independent samplings (seeds) of
// one prompt's rollouts. runs[s] holds sampling s's paths, their states comparable across runs (task states, or
// embedding clusters assigned over all runs together). An edge is a physical edge of the rollouts' prefix tree (its
// step texts from the root), leaf steps left out (a leaf's end is an outcome, not a state); its estimate in a run
// is the advantage `cfg` gives it there (the mean over its copies). mean(): the unbiased variance of the estimates
// across the runs that have the edge, averaged over the `edges` present in at least two runs. A prefix tree (merge
// off) estimates an edge from the paths below it; the graph pools every path through its state's class.
struct EdgeVariance {
  double sum_var = 0;  // over the edges
  int64_t edges = 0;
  double mean() const { return edges ? sum_var / static_cast<double>(edges) : 0.0; }
};
EdgeVariance graph_edge_variance(const std::vector<std::vector<GraphPath>>& runs, const GraphConfig& cfg);

// automatic: state where the task reports states, embedding where it reports none (graphpo_task_has_states).
enum class Equivalence { automatic, state, embedding };
inline constexpr EnumNames<Equivalence, 3> kEquivalenceNames{
    {{Equivalence::automatic, "auto"}, {Equivalence::state, "state"}, {Equivalence::embedding, "embedding"}}};
// embedding: a step's vector is the policy's final hidden state at its last token (the line end: the state the
// step reaches, which reads the whole path so far) or the mean over its tokens (what the step says).
enum class StatePooling { last, mean };
inline constexpr EnumNames<StatePooling, 2> kStatePoolingNames{
    {{StatePooling::last, "last"}, {StatePooling::mean, "mean"}}};

// How the graph grows: stepwise (the rollout stops a sequence at a state the group already expands and reallocates
// its budget), after (independent rollouts merged after the fact); automatic: stepwise where the equivalence is the
// task's states, after where it is the embedding (a state is known only once the rollout's hidden states are).
enum class Expansion { automatic, stepwise, after };
inline constexpr EnumNames<Expansion, 3> kExpansionNames{
    {{Expansion::automatic, "auto"}, {Expansion::stepwise, "stepwise"}, {Expansion::after, "after"}}};

struct GraphPoConfig {
  GraphConfig graph;
  Expansion expansion = Expansion::automatic;
  int64_t expand_budget = 1;  // stepwise: sequences continuing from one state per group (the others stop there)
  bool reallocate = true;     // stepwise: each stopped sequence buys a fork at the group's next new state
  Equivalence equivalence = Equivalence::automatic;
  double similarity = 0.92;  // embedding: cosine at which two steps reach the same state
  StatePooling pooling = StatePooling::last;
  bool edge_variance = true;  // log the split-half per-edge variance (graphpo_edge_var*)
  void validate() const;
  void visit(KeyVisitor& v);  // its recipe section's keys
};

// Whether a task reports reasoning states (Task::intermediate_states: the procedural families arithmetic,
// countdown, string_ops, compose; a filtered task its inner one's; a mixture when every member does). Datasets,
// code, constraints, rubric_proxy, user simulators and episodes report none. A task temper does not know (a
// library user's own) is taken to report them.
bool graphpo_task_has_states(const tasks::Task& task);
// The equivalence a run uses on `task` (automatic resolved), or throws naming the key when the setting cannot work
// there: "state" on a task without states (every rollout one step: GRPO), stepwise expansion without states.
Equivalence graphpo_equivalence(const GraphPoConfig& cfg, const tasks::Task& task);
// The expansion a run uses under equivalence `eq` (automatic resolved; stepwise needs the task's states).
Expansion graphpo_expansion(const GraphPoConfig& cfg, Equivalence eq);

// A rollout's steps end where the task's state extractor (Task::intermediate_states: the remaining numbers in
// countdown, the running value in arithmetic) reports a new state after a complete line; lines that change
// nothing join the next step; the rest of the completion (the answer) is the step to the leaf. Every token of a
// step gets the step's advantage; later copies of a shared physical edge leave the loss. A task without a state
// extractor gives one step per rollout: GRPO. Step-wise expansion (the default where the equivalence is the task's
// states; `expansion = "after"` turns it off) budgets the rollout itself: once `expand_budget` k (1) sequences of a
// group continued from a state, later sequences reaching it stop there (GraphPoHook) and share the continuations:
// their reward is the mean reward of the finished paths through that state, and their last step joins the graph at
// the state. With `equivalence = "embedding"` (free text, tasks without a state
// extractor) every line is a step and the state it reaches is its embedding, the mean of the current policy's
// final hidden states over the step's tokens; steps of a group whose embeddings have cosine >= `similarity`
// (0.92) share a state (greedy: each step joins the first earlier cluster whose founding step is that close, in
// path and step order); `pooling = "last"` (default) takes the hidden state at the step's line end instead of the
// mean. The default `equivalence = "auto"` is "state" where the task reports states and "embedding" where it reports
// none (a dataset); there the merge is after the fact. A step in which nothing merged (merging on) logs
// graphpo_nothing_merged = 1, and the first such step of a run warns once, naming the cause and the key to change. With
// `reallocate` the budget's savings are spent again: each sequence the budget stops earns its group one fork, given to
// the next sequence that reaches a state no sequence of the group reached before (a new class), so the group's tokens
// go to continuations of distinct states instead of re-expansions of one (spec section 6, step 4; on by default). The
// spec's variance measure, per step: each group's rollouts split in two halves (members in even and odd positions:
// independent samplings of the prompt), the graph advantage of each half alone, and for every edge both halves have
// (graph_edge_variance) the variance of its two estimates: graphpo_edge_var (the mean over those edges),
// graphpo_edge_var_tree (the same halves as prefix trees, merge off: the spec's comparison), graphpo_edge_var_edges.
// With step-wise expansion the halves are not quite independent (a stopped path's reward is estimated from paths
// that may sit in the other half).
class GraphPo : public Method {
 public:
  explicit GraphPo(GraphPoConfig cfg) : cfg_(cfg) { cfg_.validate(); }
  // The graph advantage alone over independent rollouts (expansion "after").
  explicit GraphPo(GraphConfig g) : GraphPo(after_the_fact(g)) {}
  static GraphPoConfig after_the_fact(const GraphConfig& g) {
    GraphPoConfig c;
    c.graph = g;
    c.expansion = Expansion::after;
    return c;
  }
  // Per-token features for the embedding equivalence (default: MethodEnv::hidden, the policy's).
  using Features = std::function<std::vector<float>(const Trajectory& t)>;
  void set_features(Features f) { features_ = std::move(f); }
  std::string name() const override { return "graphpo"; }
  void attach(const MethodEnv& env) override;  // resolves equivalence = "auto" on the task
  rollout::RolloutHook* rollout_hook(const RolloutRound& round) override;
  void after_reward(Batch& b) override;  // the stopped sequences' rewards
  bool advantages(Batch& b) override;
  void metrics(Metrics& m) const override;

 private:
  GraphPoConfig cfg_;
  Equivalence eq_ = Equivalence::state;  // resolved
  bool stepwise_ = false;                // resolved expansion
  MethodEnv env_;
  bool warned_ = false, nothing_merged_ = false;
  std::optional<std::string> stopped_at(const Batch& b, const Trajectory& t) const;
  GraphPoHook hook_;
  Features features_;
  void embedding_states(const std::vector<size_t>& members, const Batch& b, std::vector<GraphPath>& paths,
                        const std::vector<std::vector<int64_t>>& owners);
  GraphStats sum_;
  int64_t groups_ = 0, rollouts_ = 0, steps_ = 0, tokens_ = 0, stops_ = 0, rollout_tokens_ = 0, forks_ = 0;
  double adv_abs_ = 0, eff_abs_ = 0;
  EdgeVariance var_, var_tree_;
};

// The method's entry in the table of methods (rl/methods/registry.cpp).
extern const MethodSpec kGraphPoMethod;

}  // namespace temper::rl
