// `temper flow spotlight` and the explorer's `temper flow explore` (hidden), added to the `flow` command group
// (cli_flow.h: add_flow_commands must run first).
#pragma once

#include <CLI/CLI.hpp>
#include <vector>

#include "temper/app/cli_common.h"

namespace temper::app {

void add_flow_spotlight_commands(CLI::App& app, std::vector<Command>& commands);

}  // namespace temper::app
