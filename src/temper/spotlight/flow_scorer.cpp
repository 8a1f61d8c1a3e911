#include "temper/spotlight/flow_scorer.h"

#include <algorithm>

#include "temper/core/error.h"
#include "temper/spotlight/seeded_sampler.h"

namespace temper::spotlight {

FlowScorer::FlowScorer(std::unique_ptr<flow::VelocityModel> model, RewardFn reward, uint64_t run_seed,
                       flow::SdeConfig sde, bool ode)
    : model_(std::move(model)), reward_(std::move(reward)), run_seed_(run_seed), sde_(sde), ode_(ode) {}

void FlowScorer::set_params(std::span<const float> p) {
  TEMPER_CHECK(static_cast<int64_t>(p.size()) == model_->param_count())
      << "flow scorer: " << p.size() << " parameters for a model of " << model_->param_count();
  std::copy(p.begin(), p.end(), model_->params().begin());
}

std::vector<double> FlowScorer::score(int32_t label, const std::vector<uint64_t>& seeds) {
  const std::vector<float> x = sample_seeds(*model_, run_seed_, label, seeds, sde_, ode_);
  return reward_(x, std::vector<int32_t>(seeds.size(), label));
}

}  // namespace temper::spotlight
