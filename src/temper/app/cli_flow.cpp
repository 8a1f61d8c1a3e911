// The options of `temper flow train | rl | sample | eval`.
#include "temper/app/cli_flow.h"

#include <memory>

#include "temper/app/flow_rl.h"
#include "temper/app/flow_tools.h"
#include "temper/app/flow_train.h"
#include "temper/app/side_run.h"

namespace temper::app {

namespace {
void add_tool_options(CLI::App* cmd, FlowToolOptions& o) {
  cmd->add_option("run", o.run, "Run directory of temper flow train or temper flow rl (its newest checkpoint)")
      ->required();
  cmd->add_option("--sampler", o.sampler, "ode (Euler) or sde (Flow-GRPO's SDE)")->capture_default_str();
  cmd->add_option("--steps", o.steps, "Sampler steps")->capture_default_str();
  cmd->add_option("--cfg", o.cfg, "Classifier-free guidance scale (1: guidance-free)")->capture_default_str();
  cmd->add_option("--noise", o.noise, "The SDE's noise level a")->capture_default_str();
  cmd->add_option("--seed", o.seed, "Noise seed")->capture_default_str();
  add_threads_option(cmd, o.threads, "Threads (default: all cores)");
}
}  // namespace

void add_flow_commands(CLI::App& app, std::vector<Command>& commands) {
  auto* flow =
      app.add_subcommand("flow", "Flow-matching generators (2-D flows, a DiT on images) and discriminator-guided RL");
  flow->require_subcommand(1);
  auto train = std::make_shared<SideRunOptions>();
  auto* trn = flow->add_subcommand(
      "train", "Flow-matching training in a run directory (no recipe: a 2-D flow on eight Gaussians)");
  add_side_run_options(trn, *train);
  commands.push_back({trn, [train] { return run_flow_train(*train); }});
  auto rl = std::make_shared<SideRunOptions>();
  auto* rlc =
      flow->add_subcommand("rl", "Discriminator-guided RL from a temper flow train run (rl.base): grpo, rwfm or fm");
  add_side_run_options(rlc, *rl);
  commands.push_back({rlc, [rl] { return run_flow_rl(*rl); }});
  auto sample = std::make_shared<FlowToolOptions>();
  auto* smp = flow->add_subcommand("sample", "Samples of a flow run as a PNG (scatter or image grid) or CSV");
  add_tool_options(smp, *sample);
  smp->add_option("--out", sample->out, "Output file: .png or .csv")->required();
  smp->add_option("-n,--n", sample->n, "Samples")->capture_default_str();
  smp->add_option("--class", sample->label, "Only this class label (default: the labels in turn)");
  commands.push_back({smp, [sample] { return run_flow_sample(*sample); }});
  auto ev = std::make_shared<FlowToolOptions>();
  ev->n = 2000;
  auto* evc = flow->add_subcommand("eval", "FD, MMD, precision/recall (and distances to the true density on 2-D data)");
  add_tool_options(evc, *ev);
  evc->add_option("-n,--samples", ev->n, "Generated and real samples")->capture_default_str();
  evc->add_option("--json", ev->out, "Also write the JSON here");
  commands.push_back({evc, [ev] { return run_flow_eval(*ev); }});
}

}  // namespace temper::app
