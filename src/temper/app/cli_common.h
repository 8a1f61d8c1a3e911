// What the CLI's command files share: a Command (its CLI11 subcommand and how to run it once parsed) and the one
// --threads option every command that computes takes (0 or absent: the default; else 1 to 4 x the hardware
// threads, core/thread_count.h). main() builds the list, parses, runs the parsed one.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <string>
#include <vector>

namespace temper::app {

struct Command {
  CLI::App* cli = nullptr;
  std::function<int()> run;
};

// --threads N with HELP, checked: "--threads: 100000: expected 1 to 8 (4 x this machine's 2 hardware threads)".
CLI::Option* add_threads_option(CLI::App* cmd, int& threads, const std::string& help);

// The options of a command that trains in a run directory beside `temper train` (app/side_run.h): the recipe
// (positional), --set, --out, --resume, --allow-changes, --fallback, --stop-after, --threads.
struct SideRunOptions;
void add_side_run_options(CLI::App* cmd, SideRunOptions& o);

}  // namespace temper::app
