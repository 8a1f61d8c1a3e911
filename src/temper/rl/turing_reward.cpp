#include "temper/rl/turing_reward.h"

#include <openssl/sha.h>

#include <algorithm>

#include "temper/core/error.h"
#include "temper/tasks/user_sim.h"

namespace temper::rl {

void TuringRewardConfig::visit(KeyVisitor& v) {
  v("scale", scale, "the judge's rating mapped to [0, scale]");
  v("cap", cap, "ratings above count as the cap");
  v("format_bonus", format_bonus, "bonus for each of the two format checks");
  v("reasoning", reasoning, "the format has a reasoning block");
}

void TuringRewardConfig::validate() const {
  TEMPER_CHECK(scale > 0) << "rl.turing.scale must be > 0, got " << scale;
  TEMPER_CHECK(cap >= 1 && cap <= 7) << "rl.turing.cap: expected a rating in 1..7, got " << cap;
  TEMPER_CHECK(format_bonus >= 0) << "rl.turing.format_bonus must be >= 0, got " << format_bonus;
  TEMPER_CHECK(short_ratio > 0 && long_ratio > 0 && short_weight >= 0 && long_weight >= 0 && length_cap >= 0)
      << "rl.turing: length shaping needs positive ratios and non-negative weights";
}

bool generated_is_b(std::string_view key, std::string_view reply) {
  std::string msg;
  msg.reserve(key.size() + 1 + reply.size());
  msg.append(key).append("|").append(reply);
  unsigned char md[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(msg.data()), msg.size(), md);
  return (md[SHA256_DIGEST_LENGTH - 1] & 1) == 0;
}

int turing_score(int rating, bool generated_b) { return generated_b ? rating : 8 - rating; }

double length_penalty(int64_t generated_words, int64_t real_words, const TuringRewardConfig& cfg) {
  const double rho = static_cast<double>(generated_words) / static_cast<double>(std::max<int64_t>(1, real_words));
  const double shortv = std::max(cfg.short_ratio - rho, 0.0) / cfg.short_ratio * cfg.short_weight;
  const double longv = std::max(rho - cfg.long_ratio, 0.0) / cfg.long_ratio * cfg.long_weight;
  return std::min(cfg.length_cap, shortv + longv);
}

TuringReward turing_reward(PairwiseJudge& judge, const tasks::Problem& p, const std::string& completion, const TuringRewardConfig& cfg) {
  return turing_rewards(judge, {&p}, {&completion}, cfg)[0];
}

std::vector<TuringReward> turing_rewards(PairwiseJudge& judge, const std::vector<const tasks::Problem*>& problems,
                                         const std::vector<const std::string*>& completions,
                                         const TuringRewardConfig& cfg) {
  TEMPER_CHECK(problems.size() == completions.size())
      << "turing: " << problems.size() << " problems for " << completions.size() << " completions";
  std::vector<TuringReward> out(problems.size());
  std::vector<tasks::SimReply> sims(problems.size());
  std::vector<PairwiseJudge::Pair> pairs;
  std::vector<size_t> asked;
  for (size_t i = 0; i < problems.size(); ++i) {
    const tasks::Problem& p = *problems[i];
    TuringReward& r = out[i];
    sims[i] = tasks::parse_sim_reply(*completions[i]);
    const tasks::SimReply& sim = sims[i];
    if (sim.reply.empty() || (cfg.reasoning && !sim.reasoning_has_alpha)) {
      r.hard_zero = true;
      continue;
    }
    r.generated_b = generated_is_b(p.id, sim.reply);
    pairs.push_back(r.generated_b ? PairwiseJudge::Pair{&p, &p.answer, &sim.reply}
                                  : PairwiseJudge::Pair{&p, &sim.reply, &p.answer});
    asked.push_back(i);
  }
  std::vector<int> ratings = pairs.empty() ? std::vector<int>() : judge.rate_all(pairs);
  TEMPER_CHECK(ratings.size() == pairs.size())
      << "judge '" << judge.name() << "' rated " << ratings.size() << " of " << pairs.size() << " pairs";
  for (size_t k = 0; k < asked.size(); ++k) {
    const tasks::Problem& p = *problems[asked[k]];
    const tasks::SimReply& sim = sims[asked[k]];
    TuringReward& r = out[asked[k]];
    r.rating = ratings[k];
    TEMPER_CHECK(r.rating >= 1 && r.rating <= 7)
        << "judge '" << judge.name() << "' returned rating " << r.rating << ", expected 1..7";
    r.s = turing_score(r.rating, r.generated_b);
    r.turing = cfg.scale * static_cast<double>(std::min<int64_t>(r.s, cfg.cap) - 1) / 6.0;
    if (cfg.reasoning && sim.reasoning_blocks == 1 && sim.stray_tags == 0) r.format += cfg.format_bonus;
    if (sim.human_tags == 1 && !sim.reasoning_after_reply) r.format += cfg.format_bonus;
    r.length = length_penalty(tasks::word_count(sim.reply), tasks::word_count(p.answer), cfg);
    r.total = std::max(0.0, r.turing + r.format - r.length);
  }
  return out;
}

}  // namespace temper::rl
