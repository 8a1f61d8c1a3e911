// The options of `temper tabular train` (tabular_run.h) and `temper tabular front` (tabular_front.h).
#pragma once

#include <CLI/CLI.hpp>
#include <vector>

#include "temper/app/cli_common.h"

namespace temper::app {

// `temper tabular` with its subcommands train and front, appended to COMMANDS.
void add_tabular_commands(CLI::App& app, std::vector<Command>& commands);

}  // namespace temper::app
