// GraphPO's graph advantage (spec methods-llm-rl section 6; Zhan et al. 2026, arXiv 2606.18954) over the
// rollouts of one prompt. Each rollout is a path of steps; a step ends where the reasoning state changes
// and carries the canonical key of the state it reaches. The steps form a prefix tree whose nodes with
// the same state key merge into equivalence classes (the graph stays a DAG); each edge's advantage
// combines a correctness and an efficiency term (above graph_advantages). With merging off and one step
// per rollout it is exactly GRPO's advantage.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "temper/core/settings.h"

namespace temper::rl {

struct GraphStep {
  std::string text;   // the step's text (identity of the physical edge after its prefix)
  std::string state;  // canonical key of the state it reaches; ignored for a path's last step (the leaf)
  int64_t tokens = 0;
};

struct GraphPath {
  std::vector<GraphStep> steps;  // at least one
  double reward = 0;
  // Stopped at a state another path expands (GraphPO's expansion budget): the last step reaches that
  // state (merged like any other) instead of a leaf, and `reward` is the score the method estimated for it.
  bool open = false;
};

struct GraphConfig {
  bool merge = true;        // false: a prefix tree (every class one node)
  double pool = 0.7;        // w of S_pool
  double efficiency = 1.0;  // weight of A_eff
  double eps = 1e-4;
  void validate() const;
};

struct StepCredit {
  double advantage = 0;
  double correctness = 0, efficiency = 0;  // the two parts (before the efficiency weight)
  bool counted = true;                      // false: a later copy of a shared physical edge
};

struct GraphStats {
  int64_t tree_nodes = 0;   // distinct reasoning states as a prefix tree has them (leaves excluded)
  int64_t classes = 0;      // after merging
  int64_t refused = 0;      // merges refused because they would close a cycle
  int64_t edges = 0;        // physical edges
  int64_t shared_steps = 0; // steps that were later copies of a physical edge
};

// The last step reaches the rollout's leaf, whose score is its reward. The steps form a prefix tree (identical
// step texts after identical prefixes are one physical edge); tree nodes whose states have the same key form
// one equivalence class (merge), unless the merge would close a cycle among classes (the graph stays a DAG).
//   S(v)      mean reward of the paths through tree node v; S_class(C) the same over every path through C
//   S_pool(v) = pool * S_class(class(v)) + (1 - pool) * S(v)                          (pool 0.7)
//   A_corr(e) for edge u -> v: S_pool(v) standardised among all edges leaving class(u)   (outgoing group)
//   A_eff(e)  -(tokens from the root to v) standardised among the tree nodes of class(v) (incoming group)
//   A(e)      = A_corr(e) + efficiency * A_eff(e), on every token of the edge
// Standardisation as GRPO's: (x - mean) / (unbiased std + eps); a group of one gets 0. With merging off and
// one step per rollout (root -> leaf) A(e) is exactly GRPO's advantage. A physical edge shared by several
// rollouts is counted once in the loss (the first rollout's copy).
// credits[p][k] for step k of path p.
std::vector<std::vector<StepCredit>> graph_advantages(const std::vector<GraphPath>& paths, const GraphConfig& cfg,
                                                      GraphStats* stats = nullptr);

}  // namespace temper::rl
