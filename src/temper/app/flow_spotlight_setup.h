// What a `temper flow spotlight` trainer tells its explorer processes (`temper flow explore --fd 3`), and how an
// explorer builds its scorer from it: the base run's recorded [data], [features], [model] (the same model kind and
// sizes), the run seed (the seeds' noise), the SDE settings, the explorers' sampler, and the reward: the DG-RL
// discriminator's head (its tensors in the blob; the features are rebuilt from the recipe keys, deterministic) or
// the 2-D data's log-density. With weights_from (a run directory) the explorer loads the newest checkpoint's
// model.* itself instead of waiting for weights from the trainer's memory: the slow path the join time is
// compared with.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "temper/flow/sampler.h"
#include "temper/spotlight/explorer_loop.h"
#include "temper/spotlight/wire.h"

namespace temper::app {

struct ExplorerSetup {
  std::string flow_config;  // TOML with the base's [data], [features], [model]
  uint64_t seed = 1;
  flow::SdeConfig sde;
  std::string sampler = "sde";                                      // sde | ode
  std::string reward = "discriminator";                             // discriminator | density
  double clip = 10;                                                 // the reward's bound
  std::vector<std::pair<std::string, std::vector<float>>> tensors;  // the discriminator's ("disc.*")
  double min_request_s = 0;                                         // tests: each request lasts at least this long
  std::string weights_from;                                         // "" : weights come over the socket
};

spotlight::Message setup_message(const ExplorerSetup& s);
// The explorer side: the scorer the setup describes (throws naming the setup key that does not fit).
std::unique_ptr<spotlight::Scorer> make_explorer_scorer(const spotlight::Message& setup);

}  // namespace temper::app
