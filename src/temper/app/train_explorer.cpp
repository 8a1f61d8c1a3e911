// [rl.async]'s explorer processes from the app's side (rl/async_processes.h): the command the trainer starts them
// with, and `temper train --fd N`, the explorer program: it reads the trainer's resolved recipe from the setup
// message, loads the policy as the trainer did (model.path or the preset, [lora] with its held base: the weights each
// version replaces), builds its rollout engine (and with [env] starts its own environment) and serves blocks of
// rollout requests or conversations until the trainer stops it or is gone. It writes nothing: no run directory, no
// metrics, no checkpoint.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "temper/app/this_program.h"
#include "temper/app/train_run.h"
#include "temper/core/thread_pool.h"
#include "temper/dist/communicator.h"
#include "temper/rl/async_processes.h"
#include "temper/spotlight/wire.h"

namespace temper::app {

spotlight::ExplorerCommand TrainRun::explorer_command() const {
  // The explorers share the explorer's share of the cores (each at least one thread).
  const int threads = std::max<int>(1, cfg_.rl.async->explorer_share(num_threads()) /
                                           std::max<int>(1, static_cast<int>(cfg_.rl.async->explorer_processes)));
  return {{this_program("temper train"), "train", "--threads", std::to_string(threads)},
          {spotlight::MsgType::setup, {{"recipe", config_text_}, {"min_request_s", cfg_.rl.async->min_request_s}}, {}}};
}

std::unique_ptr<spotlight::Scorer> TrainRun::explorer_scorer() {
  choose_threads();
  weights_sent_ = !cfg_.lora;  // without [lora] every parameter comes with each version (LoRA: the adapters alone)
  start_env();                 // [env]: this explorer's own environment (its own program, or agents' endpoint)
  load_policy();
  attach_lora();
  std::unique_ptr<rl::ConversationSource> source = env_ ? conversation_source() : nullptr;
  return std::make_unique<rl::RolloutScorer>(std::move(policy_), std::move(lora_), cfg_.rl.kv_memory_mb,
                                             rl::rollout_engine_config(cfg_.rl, codec_.token_bytes), std::move(env_),
                                             std::move(source));
}

int serve_explorer_process(const TrainOptions& opts) {
  TrainOptions o = opts;
  if (!o.connect.empty()) {  // an explorer on another machine: join the trainer over TCP, the token first
    o.explorer_fd = spotlight::connect_tcp(o.connect, 60);
    const char* token = std::getenv("TEMPER_EXPLORER_TOKEN");
    spotlight::write_all(o.explorer_fd,
                         spotlight::encode({spotlight::MsgType::hello, {{"token", token ? token : ""}}, {}}));
    std::fprintf(stderr, "temper train: joined the trainer at %s as an explorer\n", o.connect.c_str());
  }
  // Started by a trainer that may itself run under mpirun -np 1 or srun: the explorer is no MPI rank (before any
  // thread exists, so the environment is this thread's to change).
  dist::forget_mpi_launch();
  const int rc = spotlight::explorer_serve(o.explorer_fd, [&o](const spotlight::Message& setup) {
    Recipe recipe = Recipe::parse(setup.head.at("recipe").get<std::string>(), "<the trainer's recipe>");
    TrainRun run(o, std::move(recipe));
    return run.explorer_scorer();
  });
  TEMPER_CHECK(rc != spotlight::kNoSetup || o.connect.empty())
      << o.connect << ": the trainer closed the connection before sending its setup (another TEMPER_EXPLORER_TOKEN?)";
  return 0;
}

}  // namespace temper::app
