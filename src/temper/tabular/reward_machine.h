// Reward machines: finite automata over a world's events that emit reward VECTORS. An edge "from condition to
// [reward]" fires when the step's events satisfy the condition (a conjunction of event / !event literals, or
// '*'); a state with no firing edge stays, with a zero reward. One machine emitting D-vectors covers several
// objectives at once; several machines (one per objective, or per group) are combined by the product in
// product.h. Leaves out: disjunctions (write one edge per disjunct), reward functions of the world state.
// Follows Toro Icarte et al., "Reward Machines: Exploiting Reward Function Structure in RL" (JAIR 2022).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace temper::tabular {

struct RmEdge {
  int64_t from = 0, to = 0;
  std::vector<std::string> require, forbid;  // events that must / must not occur; both empty: '*'
  std::vector<double> reward;                // [D]
  std::string text;                          // as written, for messages
};

struct RewardMachine {
  std::string name;
  std::vector<std::string> objectives;  // D names
  std::vector<std::string> states;      // states[0] is the initial state
  std::vector<uint8_t> terminal;        // [states]
  std::vector<RmEdge> edges;

  int64_t state_index(const std::string& s) const;  // -1 when unknown
};

// The text form a recipe gives: edges "FROM CONDITION TO" or "FROM CONDITION TO r1,r2,...", e.g.
// "start coffee has_coffee", "has_coffee office done 1". Checks names and reward lengths.
struct MachineSpec {
  std::string name;
  std::vector<std::string> objectives, states, terminal, edges;
};
RewardMachine parse_machine(const MachineSpec& spec);

// Built-in machine sets over the office events: "office2" / "office3" / "office4" (one machine emitting
// [coffee, mail] / + clean / + plant vectors) and "office2_split" / "office3_split" / "office4_split" (one machine
// per objective, combined by the product). Every machine ends at the office; "clean" pays 1 there when no
// decoration was touched (a bonus, not a per-step penalty: with discounting a penalty could be deferred forever,
// giving an infinite front).
std::vector<RewardMachine> builtin_machines(const std::string& name);
std::vector<std::string> builtin_machine_names();

// The pieces of the built-ins: "<task> then office" (1 on reaching the office after the task's event), the
// clean bonus, and one machine tracking every task (and cleanliness when clean) at once.
RewardMachine machine_task_then_office(const std::string& task);
RewardMachine machine_clean_at_office();
RewardMachine machine_tasks_vector(const std::vector<std::string>& tasks, bool clean);

}  // namespace temper::tabular
