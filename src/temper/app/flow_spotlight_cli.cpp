// The options of `temper flow spotlight` and `temper flow explore`.
#include "temper/app/flow_spotlight_cli.h"

#include <memory>

#include "temper/app/flow_spotlight.h"
#include "temper/app/side_run.h"

namespace temper::app {

void add_flow_spotlight_commands(CLI::App& app, std::vector<Command>& commands) {
  CLI::App* flow = app.get_subcommand("flow");
  auto o = std::make_shared<SideRunOptions>();
  auto* sp = flow->add_subcommand(
      "spotlight",
      "DG-RL GRPO whose groups' noise seeds are chosen by explorer processes on the previous weights "
      "(Spotlight; [flow.spotlight])");
  add_side_run_options(sp, *o);
  commands.push_back({sp, [o] { return run_flow_spotlight(*o); }});
  struct ExploreOptions {
    int fd = -1, threads = 1, nice = 0;
  };
  auto e = std::make_shared<ExploreOptions>();
  auto* ex = flow->add_subcommand("explore", "An explorer process of temper flow spotlight (started by it)");
  ex->group("");  // hidden from the help
  ex->add_option("--fd", e->fd, "The socket to the trainer")->required();
  ex->add_option("--threads", e->threads, "Threads")->capture_default_str();
  ex->add_option("--nice", e->nice, "Niceness (0..19)")->capture_default_str();
  commands.push_back({ex, [e] { return run_flow_explore(e->fd, e->threads, e->nice); }});
}

}  // namespace temper::app
