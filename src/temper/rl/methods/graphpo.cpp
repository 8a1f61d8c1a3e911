#include "temper/rl/methods/graphpo.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "temper/core/error.h"
#include "temper/core/log.h"
#include "temper/rl/method_spec.h"

namespace temper::rl {

namespace {
std::string token_text(const PromptCodec& codec, int32_t id) {
  return codec.token_bytes ? std::string(codec.token_bytes(id)) : codec.decode({id});
}
}  // namespace

std::vector<GraphStep> segment_steps(const tasks::Task& task, const tasks::Problem& p, const PromptCodec& codec,
                                     const std::vector<int32_t>& tokens, std::vector<int64_t>* step_of_token) {
  std::vector<GraphStep> steps;
  std::string text;
  GraphStep cur;
  size_t known = 0;  // states reported so far
  std::vector<int64_t> owner;
  for (int32_t id : tokens) {
    const std::string bytes = token_text(codec, id);
    text.append(bytes);
    cur.text.append(bytes);
    ++cur.tokens;
    owner.push_back(static_cast<int64_t>(steps.size()));
    if (bytes.find('\n') == std::string::npos) continue;
    const std::vector<std::string> states = task.intermediate_states(p, text.substr(0, text.rfind('\n') + 1));
    if (states.size() > known) {  // a new state: the step ends here
      known = states.size();
      cur.state = states.back();
      steps.push_back(std::move(cur));
      cur = GraphStep{};
    }
  }
  if (cur.tokens > 0 || steps.empty()) {
    steps.push_back(std::move(cur));  // the answer: the step to the leaf
  }
  if (step_of_token) *step_of_token = std::move(owner);
  return steps;
}

std::vector<GraphStep> segment_lines(const PromptCodec& codec, const std::vector<int32_t>& tokens,
                                     std::vector<int64_t>* step_of_token) {
  std::vector<GraphStep> steps;
  GraphStep cur;
  std::vector<int64_t> owner;
  for (int32_t id : tokens) {
    const std::string bytes = token_text(codec, id);
    cur.text.append(bytes);
    ++cur.tokens;
    owner.push_back(static_cast<int64_t>(steps.size()));
    if (bytes.find('\n') == std::string::npos) continue;
    steps.push_back(std::move(cur));
    cur = GraphStep{};
  }
  if (cur.tokens > 0 || steps.empty()) steps.push_back(std::move(cur));
  if (step_of_token) *step_of_token = std::move(owner);
  return steps;
}

std::vector<int64_t> cosine_clusters(const std::vector<std::vector<float>>& v, double threshold) {
  std::vector<int64_t> ids(v.size());
  std::vector<size_t> founders;
  std::vector<double> norm(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    double s = 0;
    for (float x : v[i]) s += double(x) * x;
    norm[i] = std::sqrt(s);
  }
  for (size_t i = 0; i < v.size(); ++i) {
    int64_t id = -1;
    for (size_t c = 0; c < founders.size() && id < 0; ++c) {
      const size_t j = founders[c];
      TEMPER_CHECK(v[j].size() == v[i].size()) << "graphpo: step embeddings of different sizes";
      if (norm[i] == 0 || norm[j] == 0) {
        if (norm[i] == 0 && norm[j] == 0) id = static_cast<int64_t>(c);
        continue;
      }
      double dot = 0;
      for (size_t k = 0; k < v[i].size(); ++k) dot += double(v[i][k]) * v[j][k];
      if (dot / (norm[i] * norm[j]) >= threshold) id = static_cast<int64_t>(c);
    }
    if (id < 0) {
      id = static_cast<int64_t>(founders.size());
      founders.push_back(i);
    }
    ids[i] = id;
  }
  return ids;
}

void GraphPoConfig::visit(KeyVisitor& v) {
  v("merge", graph.merge, "merge equivalent states (false: a prefix tree)");
  v("pool", graph.pool, "w of the pooled state value S_pool");
  v("efficiency", graph.efficiency, "weight of the efficiency advantage A_eff");
  v("expansion", expansion,
    "auto (stepwise where the task reports states, else after), stepwise (a state the group reached before stops the "
    "later sequence; its budget goes to a new state) or after (independent rollouts merged after the fact)",
    kExpansionNames);
  v("expand_budget", expand_budget, "stepwise: sequences continuing from one state per group (the others stop there)");
  v("reallocate", reallocate, "stepwise: each stopped sequence buys a fork at the group's next new state");
  v("equivalence", equivalence,
    "auto (state where the task reports states, else embedding), state (the task's canonical states) or embedding "
    "(each line a step, merged by the cosine of the policy's hidden states)",
    kEquivalenceNames);
  v("similarity", similarity, "embedding: cosine at which two steps reach the same state");
  v("pooling", pooling,
    "embedding: a step's vector, the hidden state at its last token (the line end: the state reached) or the mean over "
    "its tokens",
    kStatePoolingNames);
  v("edge_variance", edge_variance, "log the split-half per-edge advantage variance (graphpo_edge_var, _tree)");
}

void GraphPoConfig::validate() const {
  graph.validate();
  TEMPER_CHECK(expand_budget >= 1) << "rl.graphpo.expand_budget must be >= 1 (sequences continuing from a state; "
                                      "expansion = \"after\" for none), got "
                                   << expand_budget;
  TEMPER_CHECK(similarity > -1 && similarity <= 1)
      << "rl.graphpo.similarity must be a cosine in (-1, 1], got " << similarity;
  TEMPER_CHECK(equivalence != Equivalence::embedding || expansion != Expansion::stepwise)
      << "rl.graphpo.expansion = \"stepwise\" needs equivalence = \"state\" (it stops sequences at task states; an "
         "embedding is known only after the rollout): set expansion = \"after\" or \"auto\"";
}

bool graphpo_task_has_states(const tasks::Task& task) {
  return task.has_reasoning_states();
}

Equivalence graphpo_equivalence(const GraphPoConfig& cfg, const tasks::Task& task) {
  const bool states = graphpo_task_has_states(task);
  if (cfg.equivalence == Equivalence::state) {
    TEMPER_CHECK(states) << "rl.graphpo.equivalence = \"state\": task '" << task.name()
                         << "' reports no reasoning states, so every rollout would be one step and GraphPO would be "
                            "GRPO; set equivalence = \"embedding\" (or \"auto\") to merge its lines by hidden-state "
                            "similarity";
  }
  const Equivalence eq = cfg.equivalence == Equivalence::automatic
                             ? (states ? Equivalence::state : Equivalence::embedding)
                             : cfg.equivalence;
  TEMPER_CHECK(eq == Equivalence::state || cfg.expansion != Expansion::stepwise)
      << "rl.graphpo.expansion = \"stepwise\": task '" << task.name()
      << "' reports no reasoning states, and step-wise expansion stops sequences at one; GraphPO merges its lines by "
         "hidden-state similarity (equivalence = \"embedding\") after the fact: set expansion = \"auto\" or \"after\"";
  return eq;
}

Expansion graphpo_expansion(const GraphPoConfig& cfg, Equivalence eq) {
  if (cfg.expansion == Expansion::automatic) return eq == Equivalence::state ? Expansion::stepwise : Expansion::after;
  TEMPER_CHECK(cfg.expansion == Expansion::after || eq == Equivalence::state)
      << "rl.graphpo.expansion = \"stepwise\" needs the task's states (equivalence \"state\")";
  return cfg.expansion;
}

EdgeVariance graph_edge_variance(const std::vector<std::vector<GraphPath>>& runs, const GraphConfig& cfg) {
  // edge (its step texts from the root, the tree node it reaches) -> per run (sum of its copies' advantages, copies)
  std::map<std::string, std::vector<std::pair<double, int64_t>>> est;
  for (size_t r = 0; r < runs.size(); ++r) {
    if (runs[r].empty()) continue;
    const std::vector<std::vector<StepCredit>> credit = graph_advantages(runs[r], cfg);
    for (size_t p = 0; p < runs[r].size(); ++p) {
      const GraphPath& path = runs[r][p];
      std::string key;
      for (size_t k = 0; k < path.steps.size(); ++k) {
        const bool leaf = k + 1 == path.steps.size() && !path.open;
        if (leaf) break;
        key += path.steps[k].text;
        key += '\x1f';  // steps apart: "a" + "b\n" is not "ab" + "\n"
        auto& v = est[key];
        v.resize(runs.size(), {0.0, 0});
        v[r].first += credit[p][k].advantage, ++v[r].second;
      }
    }
  }
  EdgeVariance out;
  for (const auto& [edge, per_run] : est) {
    std::vector<double> x;
    for (const auto& [sum, n] : per_run)
      if (n > 0) x.push_back(sum / static_cast<double>(n));
    if (x.size() < 2) continue;
    double mean = 0, ss = 0;
    for (double v : x) mean += v / static_cast<double>(x.size());
    for (double v : x) ss += (v - mean) * (v - mean);
    out.sum_var += ss / static_cast<double>(x.size() - 1);
    ++out.edges;
  }
  return out;
}

void GraphPo::attach(const MethodEnv& env) {
  env_ = env;
  eq_ = env_.task ? graphpo_equivalence(cfg_, *env_.task)
                  : (cfg_.equivalence == Equivalence::automatic ? Equivalence::state : cfg_.equivalence);
  stepwise_ = graphpo_expansion(cfg_, eq_) == Expansion::stepwise;
}

// The states of a group's steps from their embeddings: every step but each path's last (the leaf).
void GraphPo::embedding_states(const std::vector<size_t>& members, const Batch& b, std::vector<GraphPath>& paths,
                               const std::vector<std::vector<int64_t>>& owners) {
  std::vector<std::vector<float>> emb;
  std::vector<std::pair<size_t, size_t>> where;  // (path, step)
  for (size_t k = 0; k < members.size(); ++k) {
    const Trajectory& t = b.traj[members[k]];
    if (paths[k].steps.size() < 2) continue;
    const std::vector<float> h = features_ ? features_(t) : env_.hidden(t.prompt, t.tokens);
    TEMPER_CHECK(!t.tokens.empty() && h.size() % t.tokens.size() == 0) << "graphpo: features are not one row per token";
    const size_t H = h.size() / t.tokens.size();
    std::vector<std::vector<float>> mean(paths[k].steps.size() - 1, std::vector<float>(H, 0.f));
    for (size_t i = 0; i < t.tokens.size(); ++i) {
      const size_t s = static_cast<size_t>(owners[k][i]);
      if (s + 1 >= paths[k].steps.size()) continue;
      if (cfg_.pooling == StatePooling::last) {  // the row after the step's last token (its line end) wins
        std::copy(h.begin() + static_cast<std::ptrdiff_t>(i * H), h.begin() + static_cast<std::ptrdiff_t>((i + 1) * H),
                  mean[s].begin());
        continue;
      }
      const float w = 1.f / static_cast<float>(paths[k].steps[s].tokens);
      for (size_t j = 0; j < H; ++j) mean[s][j] += w * h[i * H + j];
    }
    for (size_t s = 0; s + 1 < paths[k].steps.size(); ++s) {
      emb.push_back(std::move(mean[s]));
      where.emplace_back(k, s);
    }
  }
  const std::vector<int64_t> ids = cosine_clusters(emb, cfg_.similarity);
  for (size_t i = 0; i < ids.size(); ++i)
    paths[where[i].first].steps[where[i].second].state = "e" + std::to_string(ids[i]);
}

void GraphPoHook::reset(const MethodEnv* env, const RolloutRound& round, int64_t budget, bool reallocate) {
  env_ = env;
  round_ = round;
  budget_ = budget;
  reallocate_ = reallocate;
  credit_.clear();
  known_.clear();
  expanded_.clear();
  stopped_.clear();
}

rollout::HookDecision GraphPoHook::after_token(const rollout::RolloutRequest&, const rollout::Completion& c) {
  rollout::HookDecision d;
  if (c.tokens.empty()) return d;
  const PromptCodec& codec = *env_->codec;
  if (codec.token_bytes(c.tokens.back()).find('\n') == std::string_view::npos) return d;  // not a line end
  const int64_t problem = static_cast<int64_t>(round_.first) + round_.index(c.request);
  std::string text;
  for (int32_t t : c.tokens) text.append(codec.token_bytes(t));
  const std::vector<std::string> states =
      env_->task->intermediate_states(round_.problem(c.request), text.substr(0, text.rfind('\n') + 1));
  size_t& known = known_[{problem, c.member}];
  if (states.size() <= known) return d;  // no new state
  known = states.size();
  int64_t& n = expanded_[{problem, states.back()}];
  if (c.parent >= 0) {  // a fork (the reallocated budget's, or another method's): counted, never stopped
    ++n;
    return d;
  }
  if (n >= budget_) {  // enough sequences continue from here: this one stops and shares their suffixes
    d.stop = true;
    stopped_[{problem, c.member}] = states.back();
    if (reallocate_) ++credit_[problem];
  } else {
    int64_t& credit = credit_[problem];
    if (n == 0 && credit > 0) {  // a state new to the group: a saved sequence continues from here too
      d.forks = 1;
      --credit;
      ++n;
    }
    ++n;
  }
  return d;
}

rollout::RolloutHook* GraphPo::rollout_hook(const RolloutRound& round) {
  if (!stepwise_) return nullptr;
  TEMPER_CHECK(env_.codec && env_.codec->token_bytes)
      << "graphpo: step-wise expansion needs a codec that gives token bytes (rl.graphpo.expansion = \"after\" does "
         "without)";
  hook_.reset(&env_, round, cfg_.expand_budget, cfg_.reallocate);
  return &hook_;
}

// Stopped by the budget: read off the trajectory itself, so every data-parallel rank agrees (each rank's hook
// saw only its own share of the sequences). The state it stopped at is the last its text reaches.
std::optional<std::string> GraphPo::stopped_at(const Batch& b, const Trajectory& t) const {
  if (!stepwise_ || t.finish != rollout::FinishReason::hook || t.lineage.parent >= 0) return std::nullopt;
  std::vector<std::string> states = env_.task->intermediate_states(b.problems[static_cast<size_t>(t.problem)], t.text);
  if (states.empty()) return std::nullopt;
  return states.back();
}

void GraphPo::after_reward(Batch& b) {
  if (!stepwise_) return;
  // Per problem: the finished paths' rewards through each state; a stopped path gets the mean over the
  // paths through its state (finished ones; failing those, the stopped ones already estimated; failing
  // those, the group's finished mean).
  std::map<int64_t, std::vector<size_t>> by_problem;
  for (size_t i = 0; i < b.traj.size(); ++i) by_problem[b.traj[i].problem].push_back(i);
  for (auto& [prob, members] : by_problem) {
    std::map<std::string, std::pair<double, int64_t>> through;
    double all = 0;
    int64_t n_all = 0;
    std::vector<std::pair<size_t, std::string>> open;  // (trajectory, the state it stopped at)
    for (size_t i : members) {
      Trajectory& t = b.traj[i];
      if (auto s = stopped_at(b, t)) {
        open.emplace_back(i, std::move(*s));
        continue;
      }
      all += t.reward, ++n_all;
      for (const std::string& s : env_.task->intermediate_states(b.problems[static_cast<size_t>(prob)], t.text)) {
        auto& x = through[s];
        x.first += t.reward, ++x.second;
      }
    }
    for (const auto& [i, state] : open) {
      Trajectory& t = b.traj[i];
      auto it = through.find(state);
      t.reward = it != through.end() && it->second.second > 0
                     ? it->second.first / static_cast<double>(it->second.second)
                     : (n_all ? all / static_cast<double>(n_all) : 0.0);
      t.correct = false;
      t.tags.push_back("graphpo_stopped");
    }
  }
}

bool GraphPo::advantages(Batch& b) {
  sum_ = {};
  groups_ = rollouts_ = steps_ = tokens_ = stops_ = rollout_tokens_ = forks_ = 0;
  adv_abs_ = eff_abs_ = 0;
  var_ = var_tree_ = {};
  std::map<int64_t, std::vector<size_t>> groups;
  for (size_t i = 0; i < b.traj.size(); ++i) groups[b.traj[i].group].push_back(i);
  for (auto& [g, members] : groups) {
    std::vector<GraphPath> paths;
    std::vector<std::vector<int64_t>> owners(members.size());
    for (size_t k = 0; k < members.size(); ++k) {
      const Trajectory& t = b.traj[members[k]];
      GraphPath path;
      path.steps = eq_ == Equivalence::embedding ? segment_lines(*env_.codec, t.tokens, &owners[k])
                                                 : segment_steps(*env_.task, b.problems[static_cast<size_t>(t.problem)],
                                                                 *env_.codec, t.tokens, &owners[k]);
      path.reward = t.reward;
      path.open = stopped_at(b, t).has_value();
      if (path.open) ++stops_;
      if (t.lineage.parent >= 0) ++forks_;
      rollout_tokens_ +=
          static_cast<int64_t>(t.tokens.size()) - (t.lineage.parent >= 0 ? t.lineage.fork_pos : 0);  // generated
      paths.push_back(std::move(path));
    }
    if (eq_ == Equivalence::embedding) embedding_states(members, b, paths, owners);
    if (cfg_.edge_variance && paths.size() >= 4) {  // two halves of >= 2 paths: independent samplings of the prompt
      std::vector<std::vector<GraphPath>> halves(2);
      for (size_t k = 0; k < paths.size(); ++k) halves[k % 2].push_back(paths[k]);
      GraphConfig tree = cfg_.graph;
      tree.merge = false;
      const EdgeVariance v = graph_edge_variance(halves, cfg_.graph), vt = graph_edge_variance(halves, tree);
      var_.sum_var += v.sum_var, var_.edges += v.edges;
      var_tree_.sum_var += vt.sum_var, var_tree_.edges += vt.edges;
    }
    GraphStats st;
    const std::vector<std::vector<StepCredit>> credit = graph_advantages(paths, cfg_.graph, &st);
    for (size_t k = 0; k < members.size(); ++k) {
      Trajectory& t = b.traj[members[k]];
      t.advantage.assign(t.tokens.size(), 0.f);
      TEMPER_CHECK(t.loss_mask.size() == t.tokens.size()) << "graphpo: a trajectory's loss mask (" << t.loss_mask.size()
                                                          << ") does not cover its " << t.tokens.size() << " tokens";
      for (size_t i = 0; i < t.tokens.size(); ++i) {
        const StepCredit& c = credit[k][static_cast<size_t>(owners[k][i])];
        t.advantage[i] = static_cast<float>(c.advantage);
        if (!c.counted) t.loss_mask[i] = 0.f;  // a later copy of a shared edge: in the loss once
        adv_abs_ += std::fabs(c.advantage), eff_abs_ += std::fabs(c.efficiency);
        ++tokens_;
      }
      steps_ += static_cast<int64_t>(paths[k].steps.size());
    }
    sum_.tree_nodes += st.tree_nodes, sum_.classes += st.classes, sum_.refused += st.refused;
    sum_.edges += st.edges, sum_.shared_steps += st.shared_steps;
    ++groups_;
    rollouts_ += static_cast<int64_t>(members.size());
  }
  // Nothing merged: the advantage is a prefix tree's (GRPO's when no rollout has a state). Logged every step,
  // warned once.
  nothing_merged_ = cfg_.graph.merge && groups_ > 0 && sum_.classes == sum_.tree_nodes;
  if (nothing_merged_ && !warned_) {
    warned_ = true;
    const std::string task = env_.task ? env_.task->name() : std::string("?");
    if (sum_.tree_nodes == 0) {
      TEMPER_LOG(warn) << "graphpo: no rollout of " << rollouts_ << " reached an intermediate state (task '" << task
                       << "'), so every rollout is one step and the advantage is GRPO's; set rl.graphpo.equivalence = "
                          "\"embedding\" to merge lines by hidden-state similarity (warned once; "
                          "graphpo_nothing_merged logs every step)";
    } else {
      TEMPER_LOG(warn) << "graphpo: nothing merged in a step (" << sum_.tree_nodes << " states over " << groups_
                       << " groups, no two equivalent"
                       << (eq_ == Equivalence::embedding ? " at rl.graphpo.similarity = " +
                                                               toml_float(cfg_.similarity) + "; lower it to merge more"
                                                         : std::string(": the task's states all differ"))
                       << "): the advantage is a prefix tree's (warned once; graphpo_nothing_merged logs every step)";
    }
  }
  return true;
}

void GraphPo::metrics(Metrics& m) const {
  auto per = [](double x, int64_t n) { return n ? x / static_cast<double>(n) : 0.0; };
  m.emplace_back("graphpo_states_per_group", per(static_cast<double>(sum_.tree_nodes), groups_));
  m.emplace_back("graphpo_classes_per_group", per(static_cast<double>(sum_.classes), groups_));
  m.emplace_back(
      "graphpo_merge_rate",
      sum_.tree_nodes ? 1.0 - static_cast<double>(sum_.classes) / static_cast<double>(sum_.tree_nodes) : 0.0);
  m.emplace_back("graphpo_refused_merges", static_cast<double>(sum_.refused));
  m.emplace_back("graphpo_steps_per_rollout", per(static_cast<double>(steps_), rollouts_));
  m.emplace_back("graphpo_shared_steps", static_cast<double>(sum_.shared_steps));
  m.emplace_back("graphpo_adv_abs_mean", per(adv_abs_, tokens_));
  m.emplace_back("graphpo_eff_abs_mean", per(eff_abs_, tokens_));
  m.emplace_back("graphpo_stopped", static_cast<double>(stops_));  // sequences stopped by the expansion budget
  m.emplace_back("graphpo_tokens_per_group", per(static_cast<double>(rollout_tokens_), groups_));
  m.emplace_back("graphpo_forks", static_cast<double>(forks_));  // continuations the saved budget bought
  m.emplace_back("graphpo_nothing_merged", nothing_merged_ ? 1.0 : 0.0);
  // The spec's variance measure (split halves of each group, above GraphPo): the graph's and a prefix tree's.
  m.emplace_back("graphpo_edge_var", var_.mean());
  m.emplace_back("graphpo_edge_var_tree", var_tree_.mean());
  m.emplace_back("graphpo_edge_var_edges", static_cast<double>(var_.edges));
}

namespace {
class GraphPoSetup final : public MethodSetupOf<GraphPoConfig> {
  MethodEffects effects() const override {
    MethodEffects e;
    e.sets_advantages = true;
    e.forks_rollouts = cfg.reallocate && cfg.expansion != Expansion::after;
    e.fork_detail = "reallocate = true";
    return e;
  }
  // Before the model loads: "state" on a task without states, the budget without states (graphpo_equivalence).
  void check_task(const tasks::Task& task) const override { graphpo_equivalence(cfg, task); }
  std::unique_ptr<Method> make(const MethodDeps&) const override { return std::make_unique<GraphPo>(cfg); }
};
}  // namespace

const MethodSpec kGraphPoMethod{"graphpo", "rl.graphpo", 70, "GraphPO: merging equivalent reasoning states",
                                []() -> std::unique_ptr<MethodSetup> { return std::make_unique<GraphPoSetup>(); }};

}  // namespace temper::rl
