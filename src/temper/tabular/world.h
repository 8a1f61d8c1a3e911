// Deterministic tabular worlds: a transition table s, a -> s' and the labelling function L(s, a, s') as a set of
// events (a bit mask) per (s, a). Built from a grid map (walls, a start cell, event cells named by a legend) or
// an explicit transition list; the builders refuse anything that is not deterministic, since PQL's set-valued
// bootstrapping and its tracking policy assume it. Leaves out: stochastic transitions, rewards of the world itself
// (every reward comes from the reward machines over the events). Follows the office world of Toro Icarte et al.,
// "Using Reward Machines for High-Level Task Specification and Decomposition in RL" (ICML 2018).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace temper::tabular {

struct World {
  std::string name;
  int64_t states = 0, actions = 0, start = 0;
  std::vector<int64_t> next;        // [states * actions]: s' of (s, a)
  std::vector<uint32_t> label;      // [states * actions]: events of L(s, a, s'), bit i = events[i]
  std::vector<std::string> events;  // at most 32
  std::vector<std::string> state_names;
  // Grid worlds: the map, for printing (empty for transition lists).
  std::vector<std::string> rows;
  std::vector<std::pair<int64_t, int64_t>> cell;  // [states]: (row, column)

  int64_t step(int64_t s, int64_t a) const { return next[s * actions + a]; }
  uint32_t events_of(int64_t s, int64_t a) const { return label[s * actions + a]; }
  int event_index(const std::string& e) const;  // -1 when unknown
  std::string event_list() const;               // "coffee, mail, office"
  std::string label_text(uint32_t mask) const;  // "coffee+mail", or "none"
};

// A grid: rows of equal length; '#' a wall, '.' free, 'A' the start (exactly one), any other character an
// event cell named in the legend ("c=coffee"). Actions: 0 up, 1 right, 2 down, 3 left; a move into a wall or
// off the map stays. L(s, a, s') = the event of the cell s' (entering it or staying on it).
struct GridSpec {
  std::vector<std::string> rows;
  std::vector<std::string> legend;
};
World world_from_grid(const GridSpec& g, const std::string& name);

// A transition list: "s a s2" or "s a s2 event1,event2" per (s, a), every pair listed exactly once.
struct GraphSpec {
  int64_t states = 0, actions = 0, start = 0;
  std::vector<std::string> transitions;
  std::vector<std::string> events;  // their order (bit order); events a transition names must be listed
};
World world_from_graph(const GraphSpec& g, const std::string& name);

// Built-in worlds: "office" (9x9), "office_small" (5x5), "corridor" (1x7).
World builtin_world(const std::string& name);
std::vector<std::string> builtin_world_names();
GridSpec builtin_grid(const std::string& name);

}  // namespace temper::tabular
