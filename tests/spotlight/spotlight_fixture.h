// The Spotlight tests' shared setting: a small class-conditional 2-D flow on four Gaussians (the same TOML builds
// the trainer's model and the explorer processes'), the data's log-density as the reward, DG-RL GRPO settings,
// and the explorer command (the temper binary's `flow explore`).
#pragma once

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "temper/app/flow_setup.h"
#include "temper/app/flow_spotlight_setup.h"
#include "temper/app/recipe.h"
#include "temper/core/rng.h"
#include "temper/core/thread_pool.h"
#include "temper/flow/dg_rl.h"
#include "temper/flow/fm_train.h"
#include "temper/spotlight/trainer.h"

namespace temper::spotlight::test {

inline const char* kFlowToml = R"([data]
kind = "gaussians"
modes = 4
classes = 4
[model]
kind = "mlp2d"
hidden = 48
depth = 2
)";

struct Setting {
  app::FlowSetup setup;
  app::FlowParts parts;
  std::unique_ptr<flow::VelocityModel> base;
  flow::DgRlConfig rl;
  SpotlightConfig sc;

  // fm_steps > 0: the base is trained that many flow-matching steps from its init (else random weights).
  explicit Setting(int64_t fm_steps = 0) {
    set_num_threads(1);  // the trainer's share; each explorer process has its own thread
    app::Recipe r = app::Recipe::parse(kFlowToml, "spotlight test");
    setup.read(r);
    parts = app::build_flow(setup);
    base = app::make_model(setup, *parts.data);
    base->init_params(11);
    if (fm_steps > 0) {
      nn::AdamW opt(base->param_count());
      flow::FmTrainConfig fc;
      fc.batch = 128, fc.lr = 3e-3, fc.seed = 5;
      std::vector<float> grad;
      for (int64_t k = 1; k <= fm_steps; ++k) flow::fm_train_step(*base, opt, *parts.data, fc, k, grad);
    }
    std::copy(base->params().begin(), base->params().end(), parts.model->params().begin());
    rl.seed = 3, rl.lr = 2e-3, rl.beta = 0.1;
    rl.sde.steps = 10;
    rl.grpo.group = 8, rl.grpo.groups = 6;
    sc.planner.group = 8, sc.planner.seeds_per_class = 32, sc.planner.chunk = 8;
    sc.planner.cost = "seeds";
  }

  RewardFn reward() const {
    const flow::Toy2d* toy = parts.data->known();
    return [toy](const std::vector<float>& x, const std::vector<int32_t>& y) {
      std::vector<double> r(y.size());
      for (size_t i = 0; i < y.size(); ++i)
        r[i] = std::clamp(toy->log_density(x[2 * i], x[2 * i + 1], y[i]), -10.0, 10.0);
      return r;
    };
  }

  SpotlightTrainer::LabelFn labels() const {
    const flow::DataSource* data = parts.data.get();
    const int64_t groups = rl.grpo.groups;
    return [data, groups](int64_t step) {
      std::vector<float> x;
      std::vector<int32_t> y;
      data->sample(groups, mix_seed(mix_seed(3, static_cast<uint64_t>(step)), 1), x, y);
      return y;
    };
  }

  ExplorerCommand explorers() const {
    app::ExplorerSetup es;
    es.flow_config = kFlowToml, es.seed = static_cast<uint64_t>(rl.seed), es.sde = rl.sde;
    es.sampler = "sde", es.reward = "density", es.clip = 10, es.min_request_s = sc.min_request_s;
    return {{TEMPER_SPOTLIGHT_EXE, "flow", "explore", "--threads", "1"}, app::setup_message(es)};
  }

  std::unique_ptr<SpotlightTrainer> trainer() {
    return std::make_unique<SpotlightTrainer>(*parts.model, *base, reward(), labels(), rl, sc, parts.data->classes());
  }
};

}  // namespace temper::spotlight::test
