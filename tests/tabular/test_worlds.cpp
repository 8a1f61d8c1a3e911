// Worlds, reward machines and their product: tables, refusals of bad inputs, and exact fronts.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "common/error_of.h"
#include "tabular/tabular_worlds.h"
#include "temper/core/error.h"
#include "temper/tabular/ground_truth.h"
#include "temper/tabular/hypervolume.h"
#include "temper/tabular/pareto.h"

namespace temper::tabular {
namespace {

using temper::test::error_of;

TEST(TabularWorld, GridTablesAndLabels) {
  const World w = builtin_world("corridor");  // "m.*A.co"
  ASSERT_EQ(w.states, 7);
  EXPECT_EQ(w.start, 3);
  EXPECT_EQ(w.step(3, 1), 4);  // right
  EXPECT_EQ(w.step(3, 0), 3);  // up: off the map, stays
  EXPECT_EQ(w.label_text(w.events_of(3, 3)), "decoration");
  EXPECT_EQ(w.label_text(w.events_of(5, 1)), "office");
  EXPECT_EQ(w.label_text(w.events_of(3, 1)), "none");
  const World office = builtin_world("office");
  EXPECT_EQ(office.states, 67);  // 81 cells, 14 walls
  EXPECT_EQ(office.event_list(), "coffee, mail, office, decoration, plant");
}

TEST(TabularWorld, RefusesBadInputs) {
  GraphSpec g = test::two_goal_graph();
  g.transitions.push_back("0 0 2 y");
  EXPECT_NE(error_of([&] {
              world_from_graph(g, "g");
            }).find("non-deterministic: state 0 action 0 leads to 1 (x) and to 2 (y)"),
            std::string::npos);
  g = test::two_goal_graph();
  g.transitions.pop_back();
  EXPECT_NE(error_of([&] { world_from_graph(g, "g"); }).find("state 3 has no transition for action 1"),
            std::string::npos);
  g = test::two_goal_graph();
  g.transitions[0] = "0 0 1 w";
  EXPECT_NE(error_of([&] { world_from_graph(g, "g"); }).find("unknown event 'w' (events: x, y, goal, z)"),
            std::string::npos);
  EXPECT_NE(error_of([&] { world_from_grid({{"A.q"}, {"c=coffee"}}, "g"); }).find("'q' is neither"), std::string::npos);
  EXPECT_NE(error_of([&] {
              world_from_grid({{"..."}, {}}, "g");
            }).find("exactly one start cell 'A', it has 0"),
            std::string::npos);
}

TEST(TabularMachine, RefusesUnknownEventUnreachableTerminalAmbiguity) {
  const World w = world_from_graph(test::two_goal_graph(), "two_goal");
  MachineSpec m = test::two_goal_machine();
  m.edges.push_back("hx coffee hxy");
  EXPECT_NE(error_of([&] {
              make_product(w, {parse_machine(m)});
            }).find("edge 'hx coffee hxy': unknown event 'coffee' (world 'two_goal' has events: x, y, goal, z)"),
            std::string::npos);
  // z is a known event no transition emits: a terminal state only z leads to is unreachable.
  const MachineSpec unreachable{"zm", {"o"}, {"s", "end"}, {"end"}, {"s z end 1"}};
  EXPECT_NE(error_of([&] {
              make_product(w, {parse_machine(unreachable)});
            }).find("machine 'zm': terminal state 'end' is unreachable"),
            std::string::npos);
  m = test::two_goal_machine();
  m.edges.push_back("s x&!y hy");
  EXPECT_NE(error_of([&] {
              make_product(w, {parse_machine(m)});
            }).find("edges 's x hx' and 's x&!y hy' both fire on events x"),
            std::string::npos);
  m = test::two_goal_machine();
  m.edges[3] = "hx goal done 1";
  EXPECT_NE(error_of([&] { parse_machine(m); }).find("reward has 1 values, the machine has 2 objectives"),
            std::string::npos);
  m = test::two_goal_machine();
  m.edges.push_back("done x s");
  EXPECT_NE(error_of([&] { parse_machine(m); }).find("leaves the terminal state 'done'"), std::string::npos);
  const MachineSpec no_end{"loop", {"o"}, {"s"}, {}, {"s x s 1"}};
  EXPECT_NE(error_of([&] { make_product(w, {parse_machine(no_end)}); }).find("no machine has a terminal state"),
            std::string::npos);
}

TEST(TabularProduct, JointStatesRewardsAndTerminal) {
  const ProductMdp p = test::builtin_product("corridor", "office3_split");
  EXPECT_EQ(p.U, 27);
  EXPECT_EQ(p.D, 3);
  EXPECT_EQ(p.state_name(p.u0), "start|start|clean");
  // start (3) -> right (4) -> coffee (5) -> office (6): rewards 0, 0, then [1, 0, 1] and terminal.
  ProductMdp::Step st = p.step(3, p.u0, 1);
  st = p.step(st.s2, st.u2, 1);
  EXPECT_EQ(p.state_name(st.u2), "has_coffee|start|clean");
  st = p.step(st.s2, st.u2, 1);
  EXPECT_TRUE(st.terminal);
  EXPECT_EQ(std::vector<float>(st.r, st.r + 3), (std::vector<float>{1, 0, 1}));
  int64_t terminal = 0;
  for (uint8_t t : p.terminal) terminal += t;
  EXPECT_EQ(terminal, 1);  // only done|done|done: a machine at done while another is not is not terminal
}

TEST(TabularGroundTruth, HandComputedFronts) {
  const std::vector<double> f = true_front(test::two_goal_product(), 0.9);
  ASSERT_EQ(f.size(), 6u);
  const double want[6] = {0.9, 0, 0.729, 0.729, 0, 0.9};
  for (int i = 0; i < 6; ++i) EXPECT_NEAR(f[i], want[i], 1e-12) << i;
  // corridor "m.*A.co": coffee then office in 3 steps, clean: [g^2, 0, g^2]; mail (over the decoration) then back
  // past the coffee to the office in 9 steps: [g^8, g^8, 0].
  const double g = 0.95;
  const std::vector<double> c = true_front(test::builtin_product("corridor", "office3"), g);
  ASSERT_EQ(c.size(), 6u);
  EXPECT_NEAR(c[0], g * g, 1e-12);
  EXPECT_NEAR(c[2], g * g, 1e-12);
  EXPECT_NEAR(c[3], std::pow(g, 8), 1e-12);
  EXPECT_NEAR(c[4], std::pow(g, 8), 1e-12);
  EXPECT_EQ(c[5], 0.0);
}

TEST(TabularGroundTruth, ValueIterationMatchesEnumeration) {
  for (const ProductMdp& p : {test::two_goal_product(), test::builtin_product("corridor", "office3")}) {
    const std::vector<double> vi = true_front(p, 0.9), en = front_by_enumeration(p, 0.9, 10);
    const FrontMatch m = match_fronts(vi, en, p.D, 1e-12);
    EXPECT_EQ(m.missing, 0) << p.world.name;
    EXPECT_EQ(m.spurious, 0) << p.world.name;
    EXPECT_EQ(vi.size(), en.size()) << p.world.name;
  }
}

TEST(TabularGroundTruth, OfficeFrontHoldsEveryLinearOptimum) {
  // The 9x9 office world with coffee, mail and clean: 7 points; every linear scalarisation's optimum (scalar value
  // iteration) is the best front point under those weights, and no front point beats it.
  const ProductMdp p = test::builtin_product("office", "office3");
  const std::vector<double> f = true_front(p, 0.95);
  EXPECT_EQ(f.size() / 3, 7u);
  EXPECT_TRUE(is_non_dominated<double>(f, 3));
  for (double a = 0; a <= 1.0; a += 0.25)
    for (double b = 0; a + b <= 1.0; b += 0.25) {
      const double w[3] = {a, b, 1 - a - b};
      double best = 0;
      for (size_t k = 0; k < f.size(); k += 3) best = std::max(best, w[0] * f[k] + w[1] * f[k + 1] + w[2] * f[k + 2]);
      EXPECT_NEAR(scalar_optimum(p, 0.95, w), best, 1e-9) << a << " " << b;
    }
}

TEST(TabularGroundTruth, OneVectorMachineEqualsProductOfMachines) {
  for (const char* w : {"office", "office_small"}) {
    const std::vector<double> one = true_front(test::builtin_product(w, "office3"), 0.95);
    const std::vector<double> split = true_front(test::builtin_product(w, "office3_split"), 0.95);
    EXPECT_EQ(one, split) << w;
  }
}

}  // namespace
}  // namespace temper::tabular
