#include "temper/app/learning_watch.h"

#include <cmath>
#include <cstdio>

namespace temper::app {

namespace {

double metric(const rl::Metrics& m, const char* key, double otherwise) {
  for (const auto& [k, v] : m)
    if (k == key) return v;
  return otherwise;
}

}  // namespace

bool LearningWatch::advance(Streak& s, bool on, int64_t step, int64_t after) {
  if (!on) {
    s = {};
    return false;
  }
  if (s.length++ == 0) s.first = step;
  if (s.warned || s.length < after) return false;
  s.warned = true;
  return true;
}

std::vector<std::string> LearningWatch::observe(int64_t rl_step, const rl::Metrics& m) {
  std::vector<std::string> out;
  char line[640];
  // No learning signal: every advantage 0 (a flat reward in every group), whatever the reward's level.
  const double adv_var = metric(m, "adv_token_var", NAN), reward = metric(m, "reward_mean", NAN);
  if (advance(flat_, adv_var == 0.0, rl_step, after_)) {
    std::snprintf(line, sizeof line,
                  "warning: RL steps %lld-%lld had no learning signal: in every group all samples got the same reward "
                  "(reward_mean %.3f), so every advantage is 0 and the policy does not move. Remedies: SFT first "
                  "(sft.steps on gold solutions or a [teacher]'s), a larger rl.group_size or rl.temperature, a "
                  "partial-credit reward, or easier problems",
                  static_cast<long long>(flat_.first), static_cast<long long>(rl_step), reward);
    out.emplace_back(line);
  }
  const double truncated = metric(m, "truncated_frac", 0.0);
  if (advance(truncated_, truncated > 0.5, rl_step, after_)) {
    std::snprintf(line, sizeof line,
                  "warning: RL steps %lld-%lld cut more than half the completions at rl.max_new = %lld tokens "
                  "(truncated_frac %.2f): they end without an answer and score as such; raise rl.max_new (and "
                  "eval.max_new), or set rl.mask_truncated = true to leave them out of the loss",
                  static_cast<long long>(truncated_.first), static_cast<long long>(rl_step),
                  static_cast<long long>(max_new_), truncated);
    out.emplace_back(line);
  }
  for (const auto& [key, std] : m) {  // reward/<name>/std of each [[reward]] term
    if (key.rfind("reward/", 0) != 0 || key.size() < 12 || key.compare(key.size() - 4, 4, "/std") != 0) continue;
    const std::string name = key.substr(7, key.size() - 11);
    Streak& s = constant_terms_[name];
    if (!advance(s, std == 0.0, rl_step, after_)) continue;
    std::snprintf(line, sizeof line,
                  "warning: RL steps %lld-%lld: reward term '%s' gave every sample the same value (reward/%s %.4g), so "
                  "it adds nothing to the advantages; check that it scores what you mean (a program that returns a "
                  "constant, or fails on every sample: see reward_failures) or give it a partial-credit score",
                  static_cast<long long>(s.first), static_cast<long long>(rl_step), name.c_str(), name.c_str(),
                  metric(m, ("reward/" + name).c_str(), NAN));
    out.emplace_back(line);
  }
  return out;
}

}  // namespace temper::app
