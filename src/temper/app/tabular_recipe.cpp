// Reading the tabular recipe and computing the exact front when small (see tabular_recipe.h).
#include "temper/app/tabular_recipe.h"

#include "temper/tabular/ground_truth.h"

namespace temper::app {

const char* const kTabularDefaultRecipe =
    R"(# temper tabular train: Pareto Q-learning with reward machines on the 9x9 office world.
[tabular]
world = "office"
machine = "office3"
method = "pqlrm"
steps = 100000
eval_every = 1000

[run]
out = "runs/tabular-office"
)";

void read_tabular_config(Recipe& r, tabular::TabularConfig& c) {
  c = tabular::TabularConfig{};
  read_section(r, "tabular.", [&](KeyVisitor& v) { c.visit(v); });
  c.validate();
  if (c.world == "grid") read_section(r, "tabular.grid.", [&](KeyVisitor& v) { tabular::visit_grid(c.grid, v); });
  if (c.world == "graph") read_section(r, "tabular.graph.", [&](KeyVisitor& v) { tabular::visit_graph(c.graph, v); });
  if (c.machine == "custom")
    for (int64_t i : r.table_array_indices("tabular.machines")) {
      tabular::MachineSpec m;
      read_section(r, "tabular.machines." + std::to_string(i) + ".",
                   [&](KeyVisitor& v) { tabular::visit_machine(m, v); });
      c.machines.push_back(std::move(m));
    }
}

std::vector<double> tabular_truth(const tabular::ProductMdp& p, const tabular::TabularConfig& c, std::string* note) {
  note->clear();
  if (!c.truth) {
    *note = "not computed (tabular.truth = false)";
    return {};
  }
  if (p.S() * p.U > c.truth_max_states) {
    *note = "not computed: " + std::to_string(p.S() * p.U) +
            " product states > tabular.truth_max_states = " + std::to_string(c.truth_max_states);
    return {};
  }
  return tabular::true_front(p, c.gamma);
}

}  // namespace temper::app
