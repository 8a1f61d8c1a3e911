// The recipe of `temper flow spotlight` (flow_spotlight.h): [rl] (base, steps, beta, lr, weight_decay,
// max_grad_norm, seed, reward, reward_clip, checkpoint_every), [rl.sde], [rl.grpo], [rl.discriminator], [eval]
// (every, and the evaluation keys), [flow.spotlight] (spotlight/spotlight_config.h; its group is rl.grpo.group).
#pragma once

#include <cstdint>
#include <string>

#include "temper/app/flow_setup.h"
#include "temper/app/recipe.h"
#include "temper/flow/dg_rl.h"
#include "temper/flow/evaluate.h"
#include "temper/spotlight/spotlight_config.h"

namespace temper::app {

extern const char* const kFlowSpotlightRecipe;

struct FlowSpotlightRecipe {
  std::string base, base_config;  // the base run, its recorded config.toml's text
  FlowSetup setup;                // the base's [data], [features], [model]
  flow::DgRlConfig rl;            // method grpo; batch and pool unused
  std::string reward = "discriminator";
  double reward_clip = 10;
  flow::EvalConfig eval;
  int64_t eval_every = 25, checkpoint_every = 50;
  spotlight::SpotlightConfig spot;
  void read(Recipe& r);
};

}  // namespace temper::app
