// The --threads check of every command: 0 (the default) or a count core/thread_count.h accepts.
#include "temper/app/cli_common.h"

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

}  // namespace temper::app
