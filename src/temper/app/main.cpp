// The temper command line: subcommands over the library, their options declared beside them in cli_*.cpp
// (bench; model tools; run: train, eval, report, compare; serve, sandbox). Catches temper::Error at the top,
// prints it, and exits non-zero.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>
#include <new>
#include <vector>

#include "temper/app/cli_bench.h"
#include "temper/app/cli_common.h"
#include "temper/app/cli_control.h"
#include "temper/app/cli_flow.h"
#include "temper/app/cli_model_tools.h"
#include "temper/app/cli_run.h"
#include "temper/app/cli_serve.h"
#include "temper/app/cli_tabular.h"
#include "temper/app/flow_spotlight_cli.h"
#include "temper/core/error.h"
#include "temper/dist/communicator.h"
#include "temper/version.h"

namespace {

// The error line, then the exit code. Under mpirun a failing rank ends every rank (MPI_Abort), so
// none is left waiting in a collective.
int fail(int code, const char* kind, const char* what) {
  const bool dp = temper::dist::launched_by_mpi() && temper::dist::mpi_available();
  if (dp && temper::dist::world().size() > 1) {
    std::fprintf(stderr, "temper: %s (rank %d of %d): %s\n", kind, temper::dist::world().rank(),
                 temper::dist::world().size(), what);
    std::fflush(stderr);
    temper::dist::world().abort(code);
  }
  std::fprintf(stderr, "temper: %s: %s\n", kind, what);
  return code;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"temper: reinforcement-learning post-training of language models"};
  app.set_version_flag("--version", std::string("temper ") + TEMPER_VERSION);
  app.require_subcommand(1);
  std::vector<temper::app::Command> commands;  // in the order of --help
  temper::app::add_bench_commands(app, commands);
  temper::app::add_model_tool_commands(app, commands);
  temper::app::add_run_commands(app, commands);
  temper::app::add_serve_commands(app, commands);
  temper::app::add_flow_commands(app, commands);
  temper::app::add_flow_spotlight_commands(app, commands);
  temper::app::add_tabular_commands(app, commands);
  temper::app::add_control_commands(app, commands);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    for (const temper::app::Command& c : commands)
      if (c.cli->parsed()) return c.run();
  } catch (const temper::Error& e) {
    return fail(1, "error", e.what());
  } catch (const std::filesystem::filesystem_error& e) {  // a path that cannot be read or written
    return fail(1, "error", e.what());
  } catch (const std::bad_alloc&) {  // sizes are bounded before use: this is a run larger than the memory there is
    return fail(1, "out of memory",
                "an allocation failed. The memory plan (temper info MODEL; temper train prints it before loading) "
                "shows what a run needs: lower the batch (sft.batch, rl.prompts_per_step, rl.group_size, "
                "rl.micro_batch), the context (rl.max_new, model.context), the KV cache (rl.kv_memory_mb) or the "
                "evaluation (eval.problems, eval.samples; temper eval --problems, -k), or set model.recompute = true");
  } catch (const std::exception& e) {
    return fail(2, "internal error", e.what());
  }
  return 0;
}
