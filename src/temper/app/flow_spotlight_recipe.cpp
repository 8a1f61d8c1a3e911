#include "temper/app/flow_spotlight_recipe.h"

#include <fstream>
#include <sstream>

#include "temper/app/run_dir.h"
#include "temper/core/error.h"

namespace temper::app {

const char* const kFlowSpotlightRecipe =
    R"(# temper flow spotlight's built-in recipe: DG-RL GRPO from the built-in temper flow train run, seeds chosen by
# one explorer process on the previous weights
[rl]
base = "runs/flow-gaussians"
steps = 200

[eval]
every = 25

[flow.spotlight]
explorers = 1

[run]
out = "runs/flow-gaussians-spotlight"
)";

namespace {
std::string read_text(const std::string& path) {
  std::ifstream in(path);
  TEMPER_CHECK(in) << path << ": cannot read";
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}
}  // namespace

void FlowSpotlightRecipe::read(Recipe& r) {
  *this = FlowSpotlightRecipe();  // read twice on a resume: no value of the first read is a default of the second
  base = r.get_string("rl.base", "");
  TEMPER_CHECK(!base.empty()) << r.source() << ": rl.base: expected the run directory of a temper flow train run";
  base_config = read_text(recorded_config(base));
  Recipe b = Recipe::parse(base_config, recorded_config(base));
  setup.read(b);
  read_section(r, "rl.", [&](KeyVisitor& v) {
    v("steps", rl.steps, "RL steps");
    v("beta", rl.beta, "the KL weight (1: the distribution-matching point)");
    v("lr", rl.lr, "AdamW learning rate");
    v("weight_decay", rl.weight_decay, "AdamW weight decay");
    v("max_grad_norm", rl.max_grad_norm, "gradient clipping (<= 0: none)");
    v("seed", rl.seed, "the RL draws (labels, seeds' noise, the discriminator's samples)");
    v.choice("reward", reward, "discriminator (DG-RL's logit) | density (the 2-D data's log-density)",
             {"discriminator", "density"});
    v("reward_clip", reward_clip, "the reward's bound (density; the discriminator's is rl.discriminator.clip)");
    v("checkpoint_every", checkpoint_every, "steps between checkpoints (and at the end)");
  });
  // One G, two names: [flow.spotlight] group (given) sets rl.grpo.group's default, so both record the same value.
  if (r.has("flow.spotlight.group")) {
    const int64_t g = r.get_int("flow.spotlight.group", rl.grpo.group);
    TEMPER_CHECK(!r.has("rl.grpo.group") || r.get_int("rl.grpo.group", g) == g)
        << r.source() << ": flow.spotlight.group = " << g << " and rl.grpo.group = " << r.get_int("rl.grpo.group", g)
        << ": give one of them (they are the same G)";
    rl.grpo.group = g;
  }
  RecipeReader sde_v(r, "rl.sde."), grpo_v(r, "rl.grpo."), disc_v(r, "rl.discriminator.");
  rl.visit_sections(sde_v, grpo_v, disc_v);
  if (reward == "discriminator") reward_clip = rl.disc.clip;
  read_section(r, "eval.", [&](KeyVisitor& v) {
    eval.visit(v);
    v("every", eval_every, "RL steps between evaluations (0: only at the start and the end)");
    eval.validate();
  });
  spot.planner.group = rl.grpo.group;
  read_section(r, "flow.spotlight.", [&](KeyVisitor& v) { spot.visit(v); });
  try {
    rl.validate();
    spot.validate();
  } catch (const Error& e) {
    TEMPER_FAIL() << r.source() << ": " << e.what();
  }
  TEMPER_CHECK(checkpoint_every >= 1 && eval_every >= 0)
      << r.source() << ": rl.checkpoint_every >= 1 and eval.every >= 0 expected";
}

}  // namespace temper::app
