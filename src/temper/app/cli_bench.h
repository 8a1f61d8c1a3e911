// `temper bench train|load|rollout|cuda|roofline`: the benchmark subcommands' options (their code: bench_*.h).
#pragma once

#include <CLI/CLI.hpp>
#include <vector>

#include "temper/app/bench_cuda.h"
#include "temper/app/bench_load.h"
#include "temper/app/bench_rollout.h"
#include "temper/app/bench_roofline.h"
#include "temper/app/bench_train.h"
#include "temper/app/cli_common.h"

namespace temper::app {

CLI::App* add_bench_train_command(CLI::App& bench, BenchTrainOptions& o);
CLI::App* add_bench_load_command(CLI::App& bench, BenchLoadOptions& o);
CLI::App* add_bench_rollout_command(CLI::App& bench, BenchRolloutOptions& o);
CLI::App* add_bench_cuda_command(CLI::App& bench, BenchCudaOptions& o);
CLI::App* add_bench_roofline_command(CLI::App& bench, BenchRooflineOptions& o);

// `temper bench` and the five above, appended to COMMANDS.
void add_bench_commands(CLI::App& app, std::vector<Command>& commands);

}  // namespace temper::app
