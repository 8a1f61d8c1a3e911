// Sizing and per-step planning of the rollout's kept activations (kept_activations.h).
#include "temper/rl/kept_activations.h"

#include <algorithm>

#include "temper/core/memory_info.h"

namespace temper::rl {

KeptActivations::KeptActivations(Transformer& policy, rollout::RolloutEngine& engine, int64_t budget_mb)
    : policy_(policy), store_(policy.act_field_widths()), budget_mb_(budget_mb) {
  engine.set_activation_store(&store_);
}

void KeptActivations::begin_step(const dist::Communicator* comm) {
  if (slots_ < 0) {  // sized once (the communicator is set after construction)
    int64_t bytes = budget_mb_ << 20;
    if (bytes == 0) bytes = usable_memory_bytes() / 4 / std::max(1, comm ? comm->local_size() : 1);
    slots_ = bytes / (store_.slot_floats() * static_cast<int64_t>(sizeof(float)));
  }
  store_.reset(slots_, policy_.params_version());
  planned_ = 0;
}

void KeptActivations::plan(std::vector<rollout::RolloutRequest>& reqs, const std::vector<int64_t>& mine,
                           int64_t draft_factor) {
  for (int64_t j : mine) {
    rollout::RolloutRequest& r = reqs[static_cast<size_t>(j)];
    const int64_t need = static_cast<int64_t>(r.prompt.size()) + r.group_size * r.max_new * draft_factor;
    r.keep_activations = planned_ + need <= store_.capacity();
    if (r.keep_activations) planned_ += need;
  }
}

}  // namespace temper::rl
