#include "temper/rollout/self_speculation.h"

#include <chrono>
#include <cstdio>

#include "temper/core/error.h"

namespace temper::rollout {

void SelfSpeculation::attach(Transformer& model, KvPool& pool, RolloutEngine& engine, int64_t gamma, DraftHead head,
                             SpecToggle toggle) {
  TEMPER_CHECK(gamma >= 1 && gamma <= 32) << "speculative decoding: gamma (--gamma) must be in [1, 32], got " << gamma;
  auto t0 = std::chrono::steady_clock::now();
  drafter_ = std::make_unique<Int4Drafter>(128, 0, head);
  drafter_->refresh(model);
  SpecConfig c;
  c.ladder = {gamma};
  c.toggle = toggle;
  spec_ = std::make_unique<SpecController>(c);
  if (toggle == SpecToggle::cost)  // up to 64 rows, as the trainer's calibration
    spec_->set_cost_model(
        calibrate_spec_cost(model, pool, *drafter_, std::min<int64_t>(engine.config().max_seqs * (gamma + 1), 64), 2));
  build_s_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  engine.set_speculative(drafter_.get(), spec_.get());
}

std::string SelfSpeculation::summary(const EngineStats& st) const {
  if (!drafter_) return "";
  char buf[320];
  std::snprintf(
      buf, sizeof buf,
      "speculative (gamma %lld, 4-bit drafter of %.0f MB built in %.2f s): %lld of %lld drafts accepted (%.2f), "
      "%.2f tokens per policy forward",
      static_cast<long long>(spec_->gamma()), static_cast<double>(drafter_->bytes()) / (1 << 20), build_s_,
      static_cast<long long>(st.accepted), static_cast<long long>(st.drafted),
      st.drafted > 0 ? static_cast<double>(st.accepted) / static_cast<double>(st.drafted) : 0.0,
      st.spec_cycles > 0 ? 1.0 + static_cast<double>(st.accepted) / static_cast<double>(st.spec_cycles) : 1.0);
  return buf;
}

}  // namespace temper::rollout
