// `temper tabular train` and `temper tabular front`: options and dispatch (see cli_tabular.h).
#include "temper/app/cli_tabular.h"

#include <memory>

#include "temper/app/side_run.h"
#include "temper/app/tabular_front.h"
#include "temper/app/tabular_run.h"

namespace temper::app {

void add_tabular_commands(CLI::App& app, std::vector<Command>& commands) {
  CLI::App* tab =
      app.add_subcommand("tabular", "Pareto Q-learning with reward machines on tabular worlds (train, front)");
  tab->require_subcommand(1);
  auto so = std::make_shared<SideRunOptions>();
  CLI::App* train = tab->add_subcommand(
      "train", "Train a tabular learner (pqlrm, pql, qrm, ql) in a run directory; no recipe: the office world");
  add_side_run_options(train, *so);
  commands.push_back({train, [so] { return tabular_train(*so); }});
  auto fo = std::make_shared<TabularFrontOptions>();
  CLI::App* front = tab->add_subcommand(
      "front", "Print a run's learned front (with tracked returns) and the exact front when it can be computed");
  front->add_option("run", fo->run, "Run directory")->required();
  front->add_flag("--json", fo->json, "One JSON object instead of the table");
  front->add_flag("--fallback", fo->fallback, "Use the previous good checkpoint when the newest fails its checksums");
  commands.push_back({front, [fo] { return tabular_front(*fo); }});
}

}  // namespace temper::app
