// The product of a world and its reward machines: states (s, u) with u the joint machine state (one component
// per machine, mixed radix), reward vectors concatenated across machines (D = the sum of their objectives), and
// the joint state terminal when every machine that has terminal states is in one. Compiled once into tables over
// the world's label alphabet (the distinct event sets of its transitions), so a step is three lookups.
// Refuses: events a machine names that the world lacks, two edges of one state firing on one label with
// different outcomes, terminal states no run of the world reaches. Leaves out: machines with no terminal state.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "temper/tabular/reward_machine.h"
#include "temper/tabular/world.h"

namespace temper::tabular {

struct ProductMdp {
  World world;
  std::vector<RewardMachine> machines;
  int D = 0;
  int64_t U = 0, u0 = 0, L = 0;
  std::vector<std::string> objectives;  // [D]
  std::vector<uint32_t> labels;         // [L]: event masks
  std::vector<int32_t> label_id;        // [S * A]
  std::vector<int64_t> u_next;          // [U * L]
  std::vector<float> u_reward;          // [U * L * D]
  std::vector<uint8_t> terminal;        // [U]

  int64_t S() const { return world.states; }
  int64_t A() const { return world.actions; }
  struct Step {
    int64_t s2, u2;
    const float* r;  // [D]
    bool terminal;   // u2 is terminal
  };
  // One step from (s, u) with action a; u may be any joint state (the counterfactual updates use all of them).
  Step step(int64_t s, int64_t u, int64_t a) const {
    const int64_t l = label_id[s * world.actions + a];
    const int64_t u2 = u_next[u * L + l];
    return {world.next[s * world.actions + a], u2, &u_reward[(u * L + l) * D], terminal[u2] != 0};
  }
  std::string state_name(int64_t u) const;  // "has_coffee|start|clean"
};

ProductMdp make_product(World world, std::vector<RewardMachine> machines);

}  // namespace temper::tabular
