#include "temper/rl/state_graph.h"

#include <cmath>
#include <functional>
#include <map>
#include <set>

#include "temper/core/error.h"

namespace temper::rl {

void GraphConfig::validate() const {
  TEMPER_CHECK(pool >= 0 && pool <= 1) << "rl.graphpo.pool: expected a weight in [0, 1], got " << pool;
  TEMPER_CHECK(efficiency >= 0 && std::isfinite(efficiency))
      << "rl.graphpo.efficiency must be >= 0, got " << efficiency;
  TEMPER_CHECK(eps > 0) << "rl.graphpo: eps must be > 0";
}

namespace {

// (x - mean) / (unbiased std + eps) over the members; a group of one: 0.
std::vector<double> standardise(const std::vector<double>& x, double eps) {
  const size_t n = x.size();
  std::vector<double> out(n, 0.0);
  if (n < 2) return out;
  double mean = 0;
  for (double v : x) mean += v;
  mean /= static_cast<double>(n);
  double ss = 0;
  for (double v : x) ss += (v - mean) * (v - mean);
  const double sd = std::sqrt(ss / static_cast<double>(n - 1));
  for (size_t i = 0; i < n; ++i) out[i] = (x[i] - mean) / (sd + eps);
  return out;
}

// A tree node: 0 is the root; node ids by (parent, step text). Leaves are nodes too (one per path end).
struct Node {
  int64_t parent = -1;
  int64_t cls = -1;
  int64_t depth_tokens = 0;
  bool leaf = false;
  double reward_sum = 0;
  int64_t paths = 0;
};

// The prefix tree of the paths, grown path by path, and its classes: nodes merged by state key, each class with
// its class-graph successors for the cycle check.
struct GraphBuilder {
  const GraphConfig& cfg;
  std::vector<Node> nodes = std::vector<Node>(1);
  std::map<std::pair<int64_t, std::string>, int64_t> child;
  std::map<std::string, int64_t> class_of_key;
  std::vector<std::set<int64_t>> succ = std::vector<std::set<int64_t>>(1);  // class 0: the root's
  GraphStats st;

  explicit GraphBuilder(const GraphConfig& c) : cfg(c) { nodes[0].cls = 0; }

  // Is `to` reachable from `from` in the class graph?
  bool reaches(int64_t from, int64_t to) const {
    std::vector<int64_t> stack = {from};
    std::set<int64_t> seen;
    while (!stack.empty()) {
      int64_t c = stack.back();
      stack.pop_back();
      if (c == to) return true;
      if (!seen.insert(c).second) continue;
      for (int64_t d : succ[static_cast<size_t>(c)]) stack.push_back(d);
    }
    return false;
  }

  // A class of its own (no successors yet).
  int64_t new_class() {
    succ.emplace_back();
    return static_cast<int64_t>(succ.size() - 1);
  }

  // The class of a new node reached by `s` from a node of class cu: merged by key unless that would close a cycle.
  int64_t class_for(const GraphStep& s, bool last, int64_t cu) {
    if (last || !cfg.merge) return new_class();
    auto ck = class_of_key.find(s.state);
    if (ck == class_of_key.end()) {
      const int64_t c = new_class();
      class_of_key[s.state] = c;
      return c;
    }
    if (ck->second != cu && !reaches(ck->second, cu)) return ck->second;
    ++st.refused;
    return new_class();
  }

  // A new child of u for the step `s` under `id`: a physical edge, its node and that node's class.
  int64_t add_node(int64_t u, const std::string& id, const GraphStep& s, bool last) {
    const int64_t v = static_cast<int64_t>(nodes.size());
    nodes.push_back({});
    nodes[static_cast<size_t>(v)].parent = u;
    nodes[static_cast<size_t>(v)].leaf = last;
    nodes[static_cast<size_t>(v)].depth_tokens = nodes[static_cast<size_t>(u)].depth_tokens + s.tokens;
    child[{u, id}] = v;
    ++st.edges;
    const int64_t cu = nodes[static_cast<size_t>(u)].cls;
    const int64_t c = class_for(s, last, cu);
    nodes[static_cast<size_t>(v)].cls = c;
    succ[static_cast<size_t>(cu)].insert(c);
    if (!last) ++st.tree_nodes;
    return v;
  }

  // Walks path p from the root, adding the nodes it is the first to reach; `credits` gets a slot per step
  // (a later copy of a physical edge is not counted), `reached` the node of each step.
  void add_path(const GraphPath& path, size_t p, std::vector<StepCredit>& credits, std::vector<int64_t>& reached) {
    int64_t u = 0;
    nodes[0].reward_sum += path.reward, ++nodes[0].paths;
    credits.resize(path.steps.size());
    for (size_t k = 0; k < path.steps.size(); ++k) {
      const GraphStep& s = path.steps[k];
      const bool last = k + 1 == path.steps.size() && !path.open;
      // A leaf is its path's own node: two paths never share their end.
      const std::string id = last ? "\x1f"
                                    "leaf " +
                                        std::to_string(p)
                                  : s.text;
      auto it = child.find({u, id});
      int64_t v;
      if (it == child.end()) {
        v = add_node(u, id, s, last);
      } else {
        v = it->second;
        credits[k].counted = false;  // a later copy of this physical edge
        ++st.shared_steps;
      }
      nodes[static_cast<size_t>(v)].reward_sum += path.reward, ++nodes[static_cast<size_t>(v)].paths;
      reached.push_back(v);
      u = v;
    }
  }
};

// S_pool(v) per node: S(v) over the node's paths, S_class over the paths through any node of its class (each path
// once), mixed with weight `pool`.
std::vector<double> pooled_scores(const std::vector<Node>& nodes, const std::vector<GraphPath>& paths,
                                  const std::vector<std::vector<int64_t>>& path_nodes, int64_t C, double pool) {
  std::vector<double> cls_sum(static_cast<size_t>(C), 0.0);
  std::vector<int64_t> cls_n(static_cast<size_t>(C), 0);
  for (size_t p = 0; p < paths.size(); ++p) {
    std::set<int64_t> seen = {0};
    cls_sum[0] += paths[p].reward, ++cls_n[0];
    for (int64_t v : path_nodes[p]) {
      const int64_t c = nodes[static_cast<size_t>(v)].cls;
      if (seen.insert(c).second) cls_sum[static_cast<size_t>(c)] += paths[p].reward, ++cls_n[static_cast<size_t>(c)];
    }
  }
  std::vector<double> pooled(nodes.size());
  for (size_t v = 0; v < nodes.size(); ++v) {
    const Node& n = nodes[v];
    const double s = n.reward_sum / static_cast<double>(std::max<int64_t>(1, n.paths));
    const double sc = cls_sum[static_cast<size_t>(n.cls)] /
                      static_cast<double>(std::max<int64_t>(1, cls_n[static_cast<size_t>(n.cls)]));
    pooled[v] = pool * sc + (1 - pool) * s;
  }
  return pooled;
}

using Groups = std::map<int64_t, std::vector<int64_t>>;  // class -> member nodes

// Writes at each member of each group its value standardised among the group's members.
template <class Value>
void standardise_groups(const Groups& groups, Value value, double eps, std::vector<double>& a) {
  for (auto& [c, members] : groups) {
    std::vector<double> q;
    for (int64_t v : members) q.push_back(value(static_cast<size_t>(v)));
    std::vector<double> z = standardise(q, eps);
    for (size_t i = 0; i < members.size(); ++i) a[static_cast<size_t>(members[i])] = z[i];
  }
}

// Classes 1..C-1 whose nodes are tree nodes (a leaf's class holds only that leaf).
int64_t count_classes(const Groups& in_group, const std::vector<Node>& nodes, int64_t C) {
  int64_t classes = 0;
  for (int64_t c = 1; c < C; ++c) {
    auto it = in_group.find(c);
    if (it != in_group.end() && !it->second.empty() && !nodes[static_cast<size_t>(it->second[0])].leaf) ++classes;
  }
  return classes;
}

}  // namespace

std::vector<std::vector<StepCredit>> graph_advantages(const std::vector<GraphPath>& paths, const GraphConfig& cfg,
                                                      GraphStats* stats) {
  cfg.validate();
  GraphBuilder g(cfg);
  std::vector<std::vector<int64_t>> path_nodes(paths.size());  // node reached by each step
  std::vector<std::vector<StepCredit>> out(paths.size());
  for (size_t p = 0; p < paths.size(); ++p) {
    TEMPER_CHECK(!paths[p].steps.empty()) << "graphpo: path " << p << " has no steps";
    g.add_path(paths[p], p, out[p], path_nodes[p]);
  }
  const std::vector<Node>& nodes = g.nodes;
  const int64_t C = static_cast<int64_t>(g.succ.size());
  const std::vector<double> pooled = pooled_scores(nodes, paths, path_nodes, C, cfg.pool);
  // Outgoing groups: the edges (child nodes) leaving each class; incoming groups: the tree nodes of each class.
  Groups out_group, in_group;
  for (size_t v = 1; v < nodes.size(); ++v) {
    out_group[nodes[static_cast<size_t>(nodes[v].parent)].cls].push_back(static_cast<int64_t>(v));
    in_group[nodes[v].cls].push_back(static_cast<int64_t>(v));
  }
  std::vector<double> a_corr(nodes.size(), 0.0), a_eff(nodes.size(), 0.0);
  standardise_groups(
      out_group, [&](size_t v) { return pooled[v]; }, cfg.eps, a_corr);
  standardise_groups(
      in_group, [&](size_t v) { return -static_cast<double>(nodes[v].depth_tokens); }, cfg.eps, a_eff);
  for (size_t p = 0; p < paths.size(); ++p)
    for (size_t k = 0; k < path_nodes[p].size(); ++k) {
      const size_t v = static_cast<size_t>(path_nodes[p][k]);
      StepCredit& c = out[p][k];
      c.correctness = a_corr[v];
      c.efficiency = a_eff[v];
      c.advantage = a_corr[v] + cfg.efficiency * a_eff[v];
    }
  g.st.classes = count_classes(in_group, nodes, C);
  if (stats) *stats = g.st;
  return out;
}

}  // namespace temper::rl
