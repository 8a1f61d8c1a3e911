// The options of the long-running services: `temper serve` (OpenAI-compatible HTTP, serve_cmd.h) and
// `temper sandbox` (code against tests over stdin/stdout, sandbox_cmd.h).
#pragma once

#include <CLI/CLI.hpp>
#include <vector>

#include "temper/app/cli_common.h"
#include "temper/app/serve_cmd.h"

namespace temper::app {

CLI::App* add_serve_command(CLI::App& app, ServeCmdOptions& o);
CLI::App* add_sandbox_command(CLI::App& app);

// The two above, in that order, appended to COMMANDS.
void add_serve_commands(CLI::App& app, std::vector<Command>& commands);

}  // namespace temper::app
