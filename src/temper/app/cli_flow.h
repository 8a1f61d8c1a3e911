// `temper flow train | rl | sample | eval`: flow-matching generators and discriminator-guided RL (issue 38;
// flow_train.h, flow_rl.h, flow_tools.h).
#pragma once

#include <CLI/CLI.hpp>
#include <vector>

#include "temper/app/cli_common.h"

namespace temper::app {

void add_flow_commands(CLI::App& app, std::vector<Command>& commands);

}  // namespace temper::app
