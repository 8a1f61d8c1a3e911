// Reward machines from text and the built-in office machines (see reward_machine.h).
#include "temper/tabular/reward_machine.h"

#include <sstream>

#include "temper/core/error.h"
#include "temper/core/settings.h"

namespace temper::tabular {

int64_t RewardMachine::state_index(const std::string& s) const {
  for (size_t i = 0; i < states.size(); ++i)
    if (states[i] == s) return static_cast<int64_t>(i);
  return -1;
}

namespace {

void parse_condition(const std::string& cond, RmEdge& e, const std::string& where) {
  if (cond == "*") return;
  std::string lit;
  std::istringstream in(cond);
  while (std::getline(in, lit, '&')) {
    const bool neg = !lit.empty() && lit[0] == '!';
    const std::string ev = neg ? lit.substr(1) : lit;
    TEMPER_CHECK(!ev.empty()) << where << ": condition '" << cond
                              << "': expected '*' or events joined by '&', each maybe negated (coffee&!office)";
    (neg ? e.forbid : e.require).push_back(ev);
  }
}

RmEdge parse_edge(const std::string& text, const RewardMachine& m) {
  const std::string where = "machine '" + m.name + "': edge '" + text + "'";
  std::istringstream in(text);
  std::string from, cond, to, reward, extra;
  in >> from >> cond >> to >> reward >> extra;
  TEMPER_CHECK(!to.empty() && extra.empty()) << where << ": expected 'FROM CONDITION TO' or 'FROM CONDITION TO r1,r2'";
  RmEdge e;
  e.text = text;
  e.from = m.state_index(from);
  e.to = m.state_index(to);
  TEMPER_CHECK(e.from >= 0) << where << ": unknown state '" << from << "' (states: " << join_words(m.states, ", ")
                            << ")";
  TEMPER_CHECK(e.to >= 0) << where << ": unknown state '" << to << "' (states: " << join_words(m.states, ", ") << ")";
  TEMPER_CHECK(!m.terminal[e.from]) << where << ": leaves the terminal state '" << from << "' (a terminal state ends "
                                    << "the episode for this machine)";
  parse_condition(cond, e, where);
  e.reward.assign(m.objectives.size(), 0.0);
  if (!reward.empty()) {
    e.reward = split_numbers(reward, where + ": reward");
    TEMPER_CHECK(e.reward.size() == m.objectives.size())
        << where << ": reward has " << e.reward.size() << " values, the machine has " << m.objectives.size()
        << " objectives (" << join_words(m.objectives, ", ") << ")";
  }
  return e;
}

}  // namespace

RewardMachine parse_machine(const MachineSpec& spec) {
  RewardMachine m;
  m.name = spec.name;
  m.objectives = spec.objectives;
  m.states = spec.states;
  TEMPER_CHECK(!m.objectives.empty()) << "machine '" << m.name << "': objectives is empty (name at least one)";
  TEMPER_CHECK(!m.states.empty()) << "machine '" << m.name << "': states is empty (the first one is the initial state)";
  for (size_t i = 0; i < m.states.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      TEMPER_CHECK(m.states[i] != m.states[j])
          << "machine '" << m.name << "': state '" << m.states[i] << "' given twice";
  m.terminal.assign(m.states.size(), 0);
  for (const std::string& t : spec.terminal) {
    const int64_t i = m.state_index(t);
    TEMPER_CHECK(i >= 0) << "machine '" << m.name << "': terminal state '" << t << "' is not one of the states ("
                         << join_words(m.states, ", ") << ")";
    TEMPER_CHECK(i != 0) << "machine '" << m.name << "': the initial state '" << t << "' cannot be terminal";
    m.terminal[i] = 1;
  }
  for (const std::string& e : spec.edges) m.edges.push_back(parse_edge(e, m));
  return m;
}

RewardMachine machine_task_then_office(const std::string& task) {
  return parse_machine({task,
                        {task},
                        {"start", "has_" + task, "done"},
                        {"done"},
                        {"start " + task + " has_" + task, "start office done", "has_" + task + " office done 1"}});
}

RewardMachine machine_clean_at_office() {
  return parse_machine({"clean",
                        {"clean"},
                        {"clean", "dirty", "done"},
                        {"done"},
                        {"clean decoration dirty", "clean office done 1", "dirty office done"}});
}

RewardMachine machine_tasks_vector(const std::vector<std::string>& tasks, bool clean) {
  MachineSpec s;
  s.name = join_words(tasks, "+") + (clean ? "+clean" : "");
  s.objectives = tasks;
  if (clean) s.objectives.push_back("clean");
  const int bits = static_cast<int>(tasks.size()) + (clean ? 1 : 0);
  auto name = [&](int mask) {
    std::vector<std::string> parts;
    for (size_t t = 0; t < tasks.size(); ++t)
      if (mask >> t & 1) parts.push_back(tasks[t]);
    if (clean && (mask >> tasks.size() & 1)) parts.push_back("dirty");
    return parts.empty() ? std::string("start") : join_words(parts, "+");
  };
  for (int m = 0; m < (1 << bits); ++m) s.states.push_back(name(m));
  s.states.push_back("done");
  s.terminal = {"done"};
  for (int m = 0; m < (1 << bits); ++m) {
    for (size_t t = 0; t < tasks.size(); ++t)
      if (!(m >> t & 1)) s.edges.push_back(name(m) + " " + tasks[t] + " " + name(m | 1 << t));
    if (clean && !(m >> tasks.size() & 1)) s.edges.push_back(name(m) + " decoration " + name(m | 1 << tasks.size()));
    std::vector<double> r;
    for (size_t t = 0; t < tasks.size(); ++t) r.push_back(m >> t & 1);
    if (clean) r.push_back(m >> tasks.size() & 1 ? 0.0 : 1.0);
    s.edges.push_back(name(m) + " office done " + join_numbers(r));
  }
  return parse_machine(s);
}

std::vector<std::string> builtin_machine_names() {
  return {"office2", "office3", "office4", "office2_split", "office3_split", "office4_split"};
}

std::vector<RewardMachine> builtin_machines(const std::string& name) {
  const std::vector<std::string> two = {"coffee", "mail"}, four = {"coffee", "mail", "plant"};
  if (name == "office2") return {machine_tasks_vector(two, false)};
  if (name == "office3") return {machine_tasks_vector(two, true)};
  if (name == "office4") return {machine_tasks_vector(four, true)};
  if (name == "office2_split") return {machine_task_then_office("coffee"), machine_task_then_office("mail")};
  if (name == "office3_split")
    return {machine_task_then_office("coffee"), machine_task_then_office("mail"), machine_clean_at_office()};
  if (name == "office4_split")
    return {machine_task_then_office("coffee"), machine_task_then_office("mail"), machine_task_then_office("plant"),
            machine_clean_at_office()};
  TEMPER_FAIL() << "unknown built-in machine set '" << name
                << "' (built-in: " << join_words(builtin_machine_names(), ", ")
                << "; or machine = \"custom\" with [[tabular.machines]])";
}

}  // namespace temper::tabular
