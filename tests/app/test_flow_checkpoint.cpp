// app/flow_checkpoint.h: an AdamW state and DG-RL's head and counters go into a side run's checkpoint under the keys
// older run directories hold and come back equal; a checkpoint without "compute" (temper flow spotlight's before it
// saved the counter) resumes with compute 0; a missing counter or optimiser moments of another size are refused
// naming the checkpoint.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "temper/app/flow_checkpoint.h"
#include "temper/app/flow_setup.h"
#include "temper/app/recipe.h"
#include "temper/core/error.h"

namespace temper::app {
namespace {

struct Flow {
  FlowSetup setup;
  FlowParts parts;
  std::unique_ptr<flow::VelocityModel> base;
  flow::DgRlConfig cfg;
  Flow() {
    Recipe r = Recipe::parse("[data]\nkind = \"gaussians\"\nmodes = 4\nclasses = 2\n[model]\nhidden = 16\n", "test");
    setup.read(r);
    parts = build_flow(setup);
    base = make_model(setup, *parts.data);
    base->init_params(7);
    std::copy(base->params().begin(), base->params().end(), parts.model->params().begin());
    cfg.disc.samples = 64, cfg.sde.steps = 3;
  }
  std::unique_ptr<flow::DgRl> dg_rl() {
    return std::make_unique<flow::DgRl>(*parts.model, *base, *parts.data, *parts.features, cfg);
  }
};

std::string message(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(FlowCheckpoint, AdamwRoundTripsUnderItsKeys) {
  nn::AdamW a(3);
  a.m = {1, 2, 3}, a.v = {4, 5, 6}, a.step = 17;
  SideCheckpoint c;
  flow_checkpoint_put_adamw(c, a);
  ASSERT_EQ(c.tensors.size(), 2u);
  EXPECT_EQ(c.tensors[0].first, "adam.m");
  EXPECT_EQ(c.tensors[1].first, "adam.v");
  EXPECT_EQ(c.state.at("adam_step").get<int64_t>(), 17);
  nn::AdamW b(3);
  flow_checkpoint_get_adamw(c, b);
  EXPECT_EQ(b.m, a.m);
  EXPECT_EQ(b.v, a.v);
  EXPECT_EQ(b.step, 17);

  nn::AdamW other(4);
  c.from = "runs/x/checkpoints/step-4";
  EXPECT_NE(message([&] {
              flow_checkpoint_get_adamw(c, other);
            }).find("runs/x/checkpoints/step-4/trainer_state.safetensors: adam.m"),
            std::string::npos);
  c.state.erase("adam_step");
  EXPECT_NE(message([&] { flow_checkpoint_get_adamw(c, b); }).find("no \"adam_step\""), std::string::npos);
}

TEST(FlowCheckpoint, DgRlHeadAndCountersRoundTrip) {
  Flow f;
  std::unique_ptr<flow::DgRl> a = f.dg_rl();
  a->refit(*f.base, 0);
  ASSERT_GT(a->compute(), 0.0);  // the base's SDE samples were counted
  SideCheckpoint c;
  flow_checkpoint_put_dg_rl(c, *a);
  EXPECT_EQ(c.state.at("compute").get<double>(), a->compute());
  EXPECT_EQ(c.state.at("disc_fits").get<int64_t>(), 1);
  EXPECT_EQ(c.state.at("disc_accuracy").get<double>(), a->counters().fit_accuracy);
  std::unique_ptr<flow::DgRl> b = f.dg_rl();
  flow_checkpoint_get_dg_rl(c, *b);
  EXPECT_EQ(b->compute(), a->compute());
  EXPECT_EQ(b->fits(), 1);
  EXPECT_EQ(b->counters().fit_accuracy, a->counters().fit_accuracy);
  const std::vector<float> x = {0.5f, -1.0f, 2.0f, 0.25f};
  const std::vector<int32_t> y = {0, 1};
  EXPECT_EQ(b->rewards(x, y), a->rewards(x, y));  // the head came back
}

TEST(FlowCheckpoint, MissingComputeReadsAsZeroAndOtherCountersAreRequired) {
  Flow f;
  SideCheckpoint c;  // a spotlight checkpoint from before "compute" was saved: no head fitted yet
  c.from = "runs/old/checkpoints/step-8";
  c.state = {{"disc_fits", 0}, {"disc_accuracy", 0.75}};
  std::unique_ptr<flow::DgRl> rl = f.dg_rl();
  flow_checkpoint_get_dg_rl(c, *rl);
  EXPECT_EQ(rl->compute(), 0.0);
  EXPECT_EQ(rl->counters().fit_accuracy, 0.75);
  c.state.erase("disc_fits");
  EXPECT_NE(message([&] {
              flow_checkpoint_get_dg_rl(c, *rl);
            }).find("runs/old/checkpoints/step-8/trainer_state.json: no \"disc_fits\""),
            std::string::npos);
}

}  // namespace
}  // namespace temper::app
