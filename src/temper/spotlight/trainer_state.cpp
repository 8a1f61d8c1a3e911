// SpotlightTrainer's checkpoint state (trainer.h): what a resumed run needs to continue as the uninterrupted one.
#include <string>

#include "temper/core/error.h"
#include "temper/spotlight/trainer.h"

namespace temper::spotlight {

namespace {
nlohmann::json result_json(const ExploreResult& r) {
  return {{"request", r.request}, {"step", r.step},      {"group", r.group},     {"label", r.label},
          {"version", r.version}, {"worker", r.worker},  {"seconds", r.seconds}, {"arrived", r.arrived},
          {"seeds", r.seeds},     {"rewards", r.rewards}};
}

ExploreResult result_from(const nlohmann::json& j) {
  ExploreResult r;
  r.request = j.at("request").get<int64_t>(), r.step = j.at("step").get<int64_t>();
  r.group = j.at("group").get<int64_t>(), r.label = j.at("label").get<int32_t>();
  r.version = j.at("version").get<int64_t>(), r.worker = j.at("worker").get<int>();
  r.seconds = j.at("seconds").get<double>(), r.arrived = j.at("arrived").get<double>();
  r.seeds = j.at("seeds").get<std::vector<uint64_t>>(), r.rewards = j.at("rewards").get<std::vector<double>>();
  return r;
}
}  // namespace

std::vector<std::pair<std::string, std::vector<float>>> SpotlightTrainer::state_tensors() const {
  std::vector<std::pair<std::string, std::vector<float>>> t{{"adam.m", opt_.m}, {"adam.v", opt_.v}};
  for (int64_t v = store_.oldest(); v < store_.current(); ++v)
    t.emplace_back("spotlight.v" + std::to_string(v), store_.get(v));
  return t;
}

nlohmann::json SpotlightTrainer::state() const {
  nlohmann::json ahead = nlohmann::json::array();
  for (const ExploreResult& r : queue_.committed_ahead()) ahead.push_back(result_json(r));
  return {{"adam_step", opt_.step},
          {"version", store_.current()},
          {"oldest_version", store_.oldest()},
          {"planner", planner_.state()},
          {"ahead", ahead},
          {"ema", {step_s_ema_, request_s_ema_}}};
}

void SpotlightTrainer::restore(const TensorLookup& tensor, const nlohmann::json& s) {
  opt_.m = tensor("adam.m"), opt_.v = tensor("adam.v");
  opt_.step = s.at("adam_step").get<int64_t>();
  const auto version = s.at("version").get<int64_t>(), oldest = s.at("oldest_version").get<int64_t>();
  store_ = WeightStore(sc_.max_staleness);
  for (int64_t v = oldest; v < version; ++v) store_.push(v, tensor("spotlight.v" + std::to_string(v)));
  store_.push(version, policy_.params());
  planner_.restore(s.at("planner"));
  std::vector<ExploreResult> ahead;
  for (const auto& j : s.at("ahead")) ahead.push_back(result_from(j));
  queue_.restore_committed(std::move(ahead));
  const auto ema = s.at("ema").get<std::vector<double>>();
  TEMPER_CHECK(ema.size() == 2) << "spotlight checkpoint state: 'ema' expected 2 numbers";
  step_s_ema_ = ema[0], request_s_ema_ = ema[1];
}

}  // namespace temper::spotlight
