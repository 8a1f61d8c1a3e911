// ControlTrainer's checkpoint: parameters, AdamW moments, the meta-knowledge (meta: fitted now; transfer: the
// frozen copy, checked bitwise on load) and the environment's arrays, as named f32 tensors.
#include <algorithm>

#include "temper/control/control_trainer.h"
#include "temper/core/error.h"

namespace temper::control {

std::vector<std::pair<std::string, std::vector<float>>> ControlTrainer::tensors() const {
  std::vector<std::pair<std::string, std::vector<float>>> t = {{"agent.params", agent_.params()},
                                                               {"agent.adam_m", agent_.optimizer().m},
                                                               {"agent.adam_v", agent_.optimizer().v}};
  if (low_) {
    t.push_back({"low.params", low_->params()});
    t.push_back({"low.adam_m", low_->optimizer().m});
    t.push_back({"low.adam_v", low_->optimizer().v});
  }
  if (encoder_) {
    t.push_back({"encoder.params", encoder_params_});
    t.push_back({"encoder.adam_m", encoder_opt_->m});
    t.push_back({"encoder.adam_v", encoder_opt_->v});
  }
  if (std::optional<MetaKnowledge> k = knowledge())
    for (auto& e : k->tensors()) t.push_back(std::move(e));
  for (auto& [name, v] : env_.save_state()) t.push_back({"env." + name, v});
  return t;
}

void ControlTrainer::load(const std::vector<std::pair<std::string, std::vector<float>>>& t, const TrainerState& s) {
  fitted_.reset();
  auto get = [&](const std::string& name, size_t size) -> const std::vector<float>& {
    for (auto& [n, v] : t)
      if (n == name) {
        TEMPER_CHECK(v.size() == size) << "control checkpoint: tensor " << name << " has " << v.size()
                                       << " values, expected " << size;
        return v;
      }
    TEMPER_FAIL() << "control checkpoint: no tensor " << name << " (stage " << stage_name(c_.stage) << ")";
  };
  PpoAgent& a = agent_;
  a.params() = get("agent.params", a.params().size());
  a.optimizer().m = get("agent.adam_m", a.params().size());
  a.optimizer().v = get("agent.adam_v", a.params().size());
  a.optimizer().step = s.agent_adam_step;
  if (low_) {
    low_->params() = get("low.params", low_->params().size());
    low_->optimizer().m = get("low.adam_m", low_->params().size());
    low_->optimizer().v = get("low.adam_v", low_->params().size());
    low_->optimizer().step = s.low_adam_step;
  }
  if (encoder_) {
    encoder_params_ = get("encoder.params", encoder_params_.size());
    encoder_opt_->m = get("encoder.adam_m", encoder_params_.size());
    encoder_opt_->v = get("encoder.adam_v", encoder_params_.size());
    encoder_opt_->step = s.encoder_adam_step;
  }
  if (frozen_) {
    for (auto& [name, v] : frozen_->tensors()) {
      TEMPER_CHECK(get(name, v.size()) == v)
          << "control checkpoint: the frozen " << name << " differs from the meta-knowledge this run was given";
    }
  }
  std::vector<std::pair<std::string, std::vector<float>>> env_state;
  for (auto& [name, v] : env_.save_state()) env_state.push_back({name, get("env." + name, v.size())});
  env_.load_state(env_state, env_.horizon(), s.iteration > 0 ? static_cast<uint64_t>(s.iteration - 1) : 0);
  s_ = s;
}

}  // namespace temper::control
