#include "temper/rl/state_graph.h"

#include <cmath>
#include <functional>
#include <map>
#include <set>

#include "temper/core/error.h"

namespace temper::rl {

void GraphConfig::validate() const {
  TEMPER_CHECK(pool >= 0 && pool <= 1) << "rl.graphpo.pool: expected a weight in [0, 1], got " << pool;
  TEMPER_CHECK(efficiency >= 0 && std::isfinite(efficiency)) << "rl.graphpo.efficiency must be >= 0, got " << efficiency;
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

}  // namespace

std::vector<std::vector<StepCredit>> graph_advantages(const std::vector<GraphPath>& paths, const GraphConfig& cfg, GraphStats* stats) {
  cfg.validate();
  // Tree nodes: 0 is the root; node ids by (parent, step text). Leaves are nodes too (one per path end).
  struct Node {
    int64_t parent = -1;
    int64_t cls = -1;
    int64_t depth_tokens = 0;
    bool leaf = false;
    double reward_sum = 0;
    int64_t paths = 0;
  };
  std::vector<Node> nodes(1);
  std::map<std::pair<int64_t, std::string>, int64_t> child;
  std::vector<std::vector<int64_t>> path_nodes(paths.size());  // node reached by each step
  std::vector<std::vector<StepCredit>> out(paths.size());
  GraphStats st;
  // Classes: by state key (merge), each with its class-graph successors for the cycle check.
  std::map<std::string, int64_t> class_of_key;
  std::vector<std::set<int64_t>> succ(1);  // class 0: the root's
  nodes[0].cls = 0;
  auto reaches = [&](int64_t from, int64_t to) {  // is `to` reachable from `from` in the class graph?
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
  };
  auto new_class = [&] {
    succ.emplace_back();
    return static_cast<int64_t>(succ.size() - 1);
  };
  for (size_t p = 0; p < paths.size(); ++p) {
    TEMPER_CHECK(!paths[p].steps.empty()) << "graphpo: path " << p << " has no steps";
    int64_t u = 0;
    nodes[0].reward_sum += paths[p].reward, ++nodes[0].paths;
    out[p].resize(paths[p].steps.size());
    for (size_t k = 0; k < paths[p].steps.size(); ++k) {
      const GraphStep& s = paths[p].steps[k];
      const bool last = k + 1 == paths[p].steps.size() && !paths[p].open;
      // A leaf is its path's own node: two paths never share their end.
      const std::string id = last ? "\x1f" "leaf " + std::to_string(p) : s.text;
      auto it = child.find({u, id});
      int64_t v;
      if (it == child.end()) {
        v = static_cast<int64_t>(nodes.size());
        nodes.push_back({});
        nodes[static_cast<size_t>(v)].parent = u;
        nodes[static_cast<size_t>(v)].leaf = last;
        nodes[static_cast<size_t>(v)].depth_tokens = nodes[static_cast<size_t>(u)].depth_tokens + s.tokens;
        child[{u, id}] = v;
        ++st.edges;
        // Its class: merged by key unless that would close a cycle.
        const int64_t cu = nodes[static_cast<size_t>(u)].cls;
        int64_t c = -1;
        if (!last && cfg.merge) {
          auto ck = class_of_key.find(s.state);
          if (ck == class_of_key.end()) {
            c = new_class();
            class_of_key[s.state] = c;
          } else if (ck->second != cu && !reaches(ck->second, cu)) {
            c = ck->second;
          } else {
            c = new_class();
            ++st.refused;
          }
        } else {
          c = new_class();
        }
        nodes[static_cast<size_t>(v)].cls = c;
        succ[static_cast<size_t>(cu)].insert(c);
        if (!last) ++st.tree_nodes;
      } else {
        v = it->second;
        out[p][k].counted = false;  // a later copy of this physical edge
        ++st.shared_steps;
      }
      nodes[static_cast<size_t>(v)].reward_sum += paths[p].reward, ++nodes[static_cast<size_t>(v)].paths;
      path_nodes[p].push_back(v);
      u = v;
    }
  }
  // Scores: S(v) per node, S_class over the paths through any node of the class (each path once).
  const int64_t C = static_cast<int64_t>(succ.size());
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
    const double sc = cls_sum[static_cast<size_t>(n.cls)] / static_cast<double>(std::max<int64_t>(1, cls_n[static_cast<size_t>(n.cls)]));
    pooled[v] = cfg.pool * sc + (1 - cfg.pool) * s;
  }
  // Outgoing groups: the edges (child nodes) leaving each class; incoming groups: the tree nodes of each class.
  std::map<int64_t, std::vector<int64_t>> out_group, in_group;
  for (size_t v = 1; v < nodes.size(); ++v) {
    out_group[nodes[static_cast<size_t>(nodes[v].parent)].cls].push_back(static_cast<int64_t>(v));
    in_group[nodes[v].cls].push_back(static_cast<int64_t>(v));
  }
  std::vector<double> a_corr(nodes.size(), 0.0), a_eff(nodes.size(), 0.0);
  for (auto& [c, members] : out_group) {
    std::vector<double> q;
    for (int64_t v : members) q.push_back(pooled[static_cast<size_t>(v)]);
    std::vector<double> z = standardise(q, cfg.eps);
    for (size_t i = 0; i < members.size(); ++i) a_corr[static_cast<size_t>(members[i])] = z[i];
  }
  for (auto& [c, members] : in_group) {
    std::vector<double> q;
    for (int64_t v : members) q.push_back(-static_cast<double>(nodes[static_cast<size_t>(v)].depth_tokens));
    std::vector<double> z = standardise(q, cfg.eps);
    for (size_t i = 0; i < members.size(); ++i) a_eff[static_cast<size_t>(members[i])] = z[i];
  }
  for (size_t p = 0; p < paths.size(); ++p)
    for (size_t k = 0; k < path_nodes[p].size(); ++k) {
      const size_t v = static_cast<size_t>(path_nodes[p][k]);
      StepCredit& c = out[p][k];
      c.correctness = a_corr[v];
      c.efficiency = a_eff[v];
      c.advantage = a_corr[v] + cfg.efficiency * a_eff[v];
    }
  st.classes = 0;
  for (int64_t c = 1; c < C; ++c)
    if (!in_group[c].empty() && !nodes[static_cast<size_t>(in_group[c][0])].leaf) ++st.classes;
  if (stats) *stats = st;
  return out;
}

}  // namespace temper::rl
