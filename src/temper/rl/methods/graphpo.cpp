#include "temper/rl/methods/graphpo.h"

#include <cmath>
#include <map>

#include "temper/core/error.h"

namespace temper::rl {

std::vector<GraphStep> segment_steps(const tasks::Task& task, const tasks::Problem& p, const PromptCodec& codec,
                                     const std::vector<int32_t>& tokens, std::vector<int64_t>* step_of_token) {
  std::vector<GraphStep> steps;
  std::string text;
  GraphStep cur;
  size_t known = 0;  // states reported so far
  std::vector<int64_t> owner;
  for (int32_t id : tokens) {
    const std::string bytes = codec.token_bytes ? std::string(codec.token_bytes(id)) : codec.decode({id});
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

bool GraphPo::advantages(Batch& b) {
  sum_ = {};
  groups_ = rollouts_ = steps_ = tokens_ = 0;
  adv_abs_ = eff_abs_ = 0;
  std::map<int64_t, std::vector<size_t>> groups;
  for (size_t i = 0; i < b.traj.size(); ++i) groups[b.traj[i].group].push_back(i);
  for (auto& [g, members] : groups) {
    std::vector<GraphPath> paths;
    std::vector<std::vector<int64_t>> owners(members.size());
    for (size_t k = 0; k < members.size(); ++k) {
      const Trajectory& t = b.traj[members[k]];
      GraphPath path;
      path.steps = segment_steps(*env_.task, b.problems[static_cast<size_t>(t.problem)], *env_.codec, t.tokens, &owners[k]);
      path.reward = t.reward;
      paths.push_back(std::move(path));
    }
    GraphStats st;
    const std::vector<std::vector<StepCredit>> credit = graph_advantages(paths, cfg_, &st);
    for (size_t k = 0; k < members.size(); ++k) {
      Trajectory& t = b.traj[members[k]];
      t.advantage.assign(t.tokens.size(), 0.f);
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
  return true;
}

void GraphPo::metrics(Metrics& m) const {
  auto per = [](double x, int64_t n) { return n ? x / static_cast<double>(n) : 0.0; };
  m.emplace_back("graphpo_states_per_group", per(static_cast<double>(sum_.tree_nodes), groups_));
  m.emplace_back("graphpo_classes_per_group", per(static_cast<double>(sum_.classes), groups_));
  m.emplace_back("graphpo_merge_rate", sum_.tree_nodes ? 1.0 - static_cast<double>(sum_.classes) / static_cast<double>(sum_.tree_nodes) : 0.0);
  m.emplace_back("graphpo_refused_merges", static_cast<double>(sum_.refused));
  m.emplace_back("graphpo_steps_per_rollout", per(static_cast<double>(steps_), rollouts_));
  m.emplace_back("graphpo_shared_steps", static_cast<double>(sum_.shared_steps));
  m.emplace_back("graphpo_adv_abs_mean", per(adv_abs_, tokens_));
  m.emplace_back("graphpo_eff_abs_mean", per(eff_abs_, tokens_));
}

}  // namespace temper::rl
