// The --threads check of every command: 0 (the default) or a count core/thread_count.h accepts.
#include "temper/app/cli_common.h"

#include "temper/app/side_run.h"
#include "temper/core/thread_count.h"

namespace temper::app {

CLI::Option* add_threads_option(CLI::App* cmd, int& threads, const std::string& help) {
  const CLI::Validator check(
      [](std::string& text) -> std::string {
        if (text == "0" || parse_thread_count(text) > 0) return "";
        return text + ": expected " + thread_count_range();
      },
      "");  // no description: the help keeps "--threads INT"
  return cmd->add_option("--threads", threads, help)->check(check);
}

void add_side_run_options(CLI::App* cmd, SideRunOptions& o) {
  cmd->add_option("recipe", o.recipe, "Recipe (TOML); none: the built-in one (or, with --resume, the run's)");
  cmd->add_option("--set", o.sets, "Override a recipe key: --set run.out=DIR (repeatable)");
  cmd->add_option("--out", o.out, "Run directory (default: the recipe's run.out)");
  auto* resume = cmd->add_option("--resume", o.resume, "Continue the run in this directory from its newest checkpoint");
  cmd->add_flag("--allow-changes", o.allow_changes,
                "With --resume: apply a recipe / --set that change the run's config (recorded in RUN/history.jsonl)")
      ->needs(resume);
  cmd->add_flag("--fallback", o.fallback,
                "With --resume: when the newest checkpoint fails its checksums, continue from the previous good one")
      ->needs(resume);
  cmd->add_option("--stop-after", o.stop_after, "Checkpoint and exit after this step; continue with --resume");
  add_threads_option(cmd, o.threads, "Threads (default: all cores)");
}

}  // namespace temper::app
