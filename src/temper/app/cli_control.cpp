// `temper control train` and `temper control eval`: options and dispatch (see cli_control.h).
#include "temper/app/cli_control.h"

#include <memory>

#include "temper/app/control_run.h"
#include "temper/app/side_run.h"

namespace temper::app {

void add_control_commands(CLI::App& app, std::vector<Command>& commands) {
  CLI::App* ctl = app.add_subcommand(
      "control", "Meta-knowledge transfer on control bodies: a high level trained once on a point mass, reused frozen");
  ctl->require_subcommand(1);
  auto so = std::make_shared<SideRunOptions>();
  CLI::App* train = ctl->add_subcommand(
      "train", "Train a control stage (control.stage: meta, transfer or scratch) in a run directory; no recipe: meta");
  add_side_run_options(train, *so);
  commands.push_back({train, [so] { return control_train(*so); }});
  auto eo = std::make_shared<ControlEvalOptions>();
  CLI::App* eval = ctl->add_subcommand(
      "eval", "Evaluate a control run's newest checkpoint on tasks it never trained on; prints one JSON object");
  eval->add_option("run", eo->run, "Run directory")->required();
  eval->add_option("--envs", eo->envs, "Tasks evaluated")->capture_default_str();
  eval->add_option("--tasks", eo->tasks, "unseen (tasks no run trains or evaluates on) or eval (the run's own set)")
      ->capture_default_str();
  eval->add_option("--json", eo->json_out, "Write the JSON here (default: stdout)");
  eval->add_flag("--fallback", eo->fallback, "Use the previous good checkpoint when the newest fails its checksums");
  add_threads_option(eval, eo->threads, "Threads (default: all cores)");
  commands.push_back({eval, [eo] { return control_eval(*eo); }});
}

}  // namespace temper::app
