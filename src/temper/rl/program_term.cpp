#include "temper/rl/program_term.h"

#include <nlohmann/json.hpp>

#include "temper/reward/program_reward.h"

namespace temper::rl {

namespace {

using json = nlohmann::json;

class ProgramTerm final : public RewardTerm {
 public:
  ProgramTerm(const RewardTermConfig& c, const std::vector<std::string>& env)
      : program_({c.name, c.program, c.workers, c.timeout_s, c.start_timeout_s, env}) {}
  void start() override { program_.start(); }
  std::vector<TermScore> score(const std::vector<RewardQuery>& qs, int64_t step) override {
    std::vector<std::string> items;
    items.reserve(qs.size());
    for (const RewardQuery& q : qs) items.push_back(reward_item_json(q));
    std::vector<reward::ProgramScore> got = program_.score(items, step);
    std::vector<TermScore> out(got.size());
    for (size_t i = 0; i < got.size(); ++i) {
      out[i].failed = !got[i].ok;
      out[i].value = got[i].reward;
      out[i].components = std::move(got[i].components);
      out[i].info = got[i].ok ? std::move(got[i].info) : "failed: " + got[i].error;
      out[i].correct = got[i].correct;
    }
    return out;
  }
  int64_t failures() const override { return program_.failures(); }

 private:
  reward::ProgramReward program_;
};

}  // namespace

std::string reward_item_json(const RewardQuery& q) {
  const tasks::Problem& p = *q.problem;
  json j = {{"id", q.id}, {"problem_id", p.id}, {"prompt", p.shown()}, {"completion", *q.completion}};
  if (!p.messages.empty()) {
    json ms = json::array();
    for (const tasks::Message& m : p.messages) ms.push_back({{"role", m.role}, {"content", m.content}});
    j["messages"] = std::move(ms);
  }
  if (!p.answer.empty()) j["answer"] = p.answer;
  if (!p.rubric.empty()) j["rubric"] = p.rubric;
  if (p.row) {
    json row = json::parse(*p.row, nullptr, /*allow_exceptions=*/false);
    if (!row.is_discarded()) j["row"] = std::move(row);
  }
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::unique_ptr<RewardTerm> make_program_term(const RewardTermConfig& c, const std::vector<std::string>& env) {
  return std::make_unique<ProgramTerm>(c, env);
}

}  // namespace temper::rl
