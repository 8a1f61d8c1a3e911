// Small worlds the tabular tests share: a 4-state transition-list world with a hand-computed front, and builders.
#pragma once

#include <vector>

#include "temper/tabular/config.h"
#include "temper/tabular/product.h"

namespace temper::tabular::test {

// From 0: action 0 -> 1 (event x), action 1 -> 2 (event y); from 1: 0 -> 3 (goal), 1 stays; from 2: 0 -> 3 (goal),
// 1 -> 0; 3 stays (goal). The machine pays [1,0] for x then goal, [0,1] for y then goal, [1,1] for y, x, goal:
// with gamma 0.9 the front is (0.9, 0), (0, 0.9), (0.729, 0.729) (goal on the 2nd step, or the 4th via 2, 0, 1).
inline GraphSpec two_goal_graph() {
  GraphSpec g;
  g.states = 4;
  g.actions = 2;
  g.start = 0;
  g.events = {"x", "y", "goal", "z"};
  g.transitions = {"0 0 1 x", "0 1 2 y", "1 0 3 goal", "1 1 1", "2 0 3 goal", "2 1 0", "3 0 3 goal", "3 1 3 goal"};
  return g;
}

inline MachineSpec two_goal_machine() {
  return {"xy",
          {"x", "y"},
          {"s", "hx", "hy", "hxy", "done"},
          {"done"},
          {"s x hx", "s y hy", "hy x hxy", "hx goal done 1,0", "hy goal done 0,1", "hxy goal done 1,1", "s goal done"}};
}

inline ProductMdp two_goal_product() {
  return make_product(world_from_graph(two_goal_graph(), "two_goal"), {parse_machine(two_goal_machine())});
}

inline ProductMdp builtin_product(const std::string& world, const std::string& machine) {
  return make_product(builtin_world(world), builtin_machines(machine));
}

}  // namespace temper::tabular::test
