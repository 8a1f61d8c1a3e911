// The options of `temper control train` and `temper control eval` (control_run.h).
#pragma once

#include <CLI/CLI.hpp>
#include <vector>

#include "temper/app/cli_common.h"

namespace temper::app {

// `temper control` with its subcommands train and eval, appended to COMMANDS.
void add_control_commands(CLI::App& app, std::vector<Command>& commands);

}  // namespace temper::app
