// The options of the commands around a training run: `temper train`, `eval`, `report`, `compare` (their code:
// train_cmd.h, eval_cmd.h, report_cmd.h).
#pragma once

#include <CLI/CLI.hpp>
#include <vector>

#include "temper/app/cli_common.h"
#include "temper/app/eval_cmd.h"
#include "temper/app/report_cmd.h"
#include "temper/app/train_cmd.h"

namespace temper::app {

CLI::App* add_train_command(CLI::App& app, TrainOptions& o);
CLI::App* add_eval_command(CLI::App& app, EvalOptions& o);
CLI::App* add_report_command(CLI::App& app, ReportOptions& o);
CLI::App* add_compare_command(CLI::App& app, CompareCmdOptions& o);

// The four above, in that order, appended to COMMANDS.
void add_run_commands(CLI::App& app, std::vector<Command>& commands);

}  // namespace temper::app
