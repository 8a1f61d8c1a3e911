#include "temper/rl/curriculum.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "temper/core/error.h"

namespace temper::rl {

void CurriculumConfig::parse_ratio(const std::string& text, int64_t& a, int64_t& b) {
  size_t colon = text.find(':');
  bool ok = colon != std::string::npos && colon > 0 && colon + 1 < text.size() &&
            text.find_first_not_of("0123456789:") == std::string::npos && text.find(':', colon + 1) == std::string::npos;
  if (ok) {
    a = std::stoll(text.substr(0, colon));
    b = std::stoll(text.substr(colon + 1));
    ok = a + b > 0;
  }
  TEMPER_CHECK(ok) << "curriculum.ratio: expected \"SFT:RL\" with non-negative integers, not both 0 (e.g. \"4:1\"), got '" << text << "'";
}

void CurriculumConfig::visit(KeyVisitor& v) {
  std::string ratio = std::to_string(sft_parts) + ":" + std::to_string(rl_parts);
  v("ratio", ratio, "SFT:RL share of the budget");
  parse_ratio(ratio, sft_parts, rl_parts);
  v("budget", budget, "what the budget counts: prompts, steps (optimiser steps)", kBudgetUnitNames);
  v("total", total, "the budget of both stages together");
  v("sft_set", sft_set, "the task's train_set in the SFT stage");
  v("rl_set", rl_set, "the task's train_set in the RL stage");
  v("require_coverage", require_coverage, "a module of the task the SFT stage never shows stops the run");
}

void CurriculumConfig::validate() const {
  TEMPER_CHECK(sft_parts >= 0 && rl_parts >= 0 && sft_parts + rl_parts > 0)
      << "curriculum.ratio: parts must be >= 0, not both 0";
  TEMPER_CHECK(total > 0) << "curriculum.total: expected the budget of both stages (> 0), got " << total;
  TEMPER_CHECK(!sft_set.empty() && !rl_set.empty()) << "curriculum.sft_set and rl_set must not be empty";
}

CurriculumPlan plan_curriculum(const CurriculumConfig& c, int64_t sft_batch, int64_t rl_prompts, int64_t rl_updates_per_step) {
  c.validate();
  TEMPER_CHECK(sft_batch > 0 && rl_prompts > 0 && rl_updates_per_step > 0) << "curriculum: batch sizes must be > 0";
  // Whole steps, rounded to the nearest (at least one for a stage with a share); RL gets what the SFT
  // stage's whole steps leave of the total.
  auto steps = [](double units, int64_t per_step, bool wanted) {
    int64_t n = static_cast<int64_t>(std::llround(units / static_cast<double>(per_step)));
    return wanted ? std::max<int64_t>(1, n) : 0;
  };
  const double sft_share = static_cast<double>(c.total) * static_cast<double>(c.sft_parts) / static_cast<double>(c.sft_parts + c.rl_parts);
  const int64_t sft_unit = c.budget == BudgetUnit::prompts ? sft_batch : 1,
                rl_unit = c.budget == BudgetUnit::prompts ? rl_prompts : rl_updates_per_step;
  CurriculumPlan p;
  p.sft_steps = steps(sft_share, sft_unit, c.sft_parts > 0);
  p.rl_steps = steps(std::max(0.0, static_cast<double>(c.total - p.sft_steps * sft_unit)), rl_unit, c.rl_parts > 0);
  p.sft_prompts = p.sft_steps * sft_batch;
  p.rl_prompts = p.rl_steps * rl_prompts;
  p.sft_updates = p.sft_steps;
  p.rl_updates = p.rl_steps * rl_updates_per_step;
  return p;
}

std::string CurriculumPlan::describe() const {
  char buf[256];
  std::snprintf(buf, sizeof buf, "SFT %lld steps (%lld prompts, %lld optimiser steps), RL %lld steps (%lld prompts, %lld optimiser steps)",
                static_cast<long long>(sft_steps), static_cast<long long>(sft_prompts), static_cast<long long>(sft_updates),
                static_cast<long long>(rl_steps), static_cast<long long>(rl_prompts), static_cast<long long>(rl_updates));
  return buf;
}

Coverage count_coverage(const tasks::Task& task, int64_t n) {
  Coverage c;
  for (const std::string& m : task.module_inventory()) c.count[m] = 0;
  const int64_t size = task.size(tasks::Split::train);
  for (int64_t i = 0; i < n; ++i) {
    uint64_t idx = static_cast<uint64_t>(i);
    if (size > 0) idx %= static_cast<uint64_t>(size);
    for (const std::string& m : task.problem(tasks::Split::train, idx).modules) ++c.count[m];
    ++c.problems;
  }
  for (auto& [m, k] : c.count)
    if (k == 0) c.missing.push_back(m);
  return c;
}

std::string Coverage::describe() const {
  std::string s = std::to_string(count.size() - missing.size()) + "/" + std::to_string(count.size()) + " modules over " +
                  std::to_string(problems) + " problems:";
  for (auto& [m, k] : count) s += " " + m + "=" + std::to_string(k);
  if (!missing.empty()) {
    s += "; never shown:";
    for (auto& m : missing) s += " " + m;
  }
  return s;
}

}  // namespace temper::rl
