#include "temper/tasks/constraints.h"

#include <algorithm>
#include <vector>

#include "temper/core/error.h"

namespace temper::tasks {
namespace {

constexpr int kMaxVars = 5;
constexpr int kMaxValue = 20;

struct Constraint {
  char kind;  // + - < !
  int x, y;
  int k;      // + and -: the right-hand side
  bool holds(const std::vector<int>& v) const {
    switch (kind) {
      case '+': return v[static_cast<size_t>(x)] + v[static_cast<size_t>(y)] == k;
      case '-': return v[static_cast<size_t>(x)] - v[static_cast<size_t>(y)] == k;
      case '<': return v[static_cast<size_t>(x)] < v[static_cast<size_t>(y)];
      default: return v[static_cast<size_t>(x)] != v[static_cast<size_t>(y)];
    }
  }
  std::string text() const {
    std::string a(1, static_cast<char>('a' + x)), b(1, static_cast<char>('a' + y));
    switch (kind) {
      case '+': return a + "+" + b + "=" + std::to_string(k);
      case '-': return a + "-" + b + "=" + std::to_string(k);
      case '<': return a + "<" + b;
      default: return a + "!=" + b;
    }
  }
};

// Assignments of n variables in [0, m] satisfying every constraint, counting up to `limit`.
int64_t count_solutions(const std::vector<Constraint>& cs, int n, int m, int64_t limit) {
  std::vector<int> v(static_cast<size_t>(n), 0);
  int64_t found = 0;
  while (true) {
    bool ok = true;
    for (const Constraint& c : cs) ok = ok && c.holds(v);
    if (ok && ++found >= limit) return found;
    int i = 0;
    while (i < n && ++v[static_cast<size_t>(i)] > m) v[static_cast<size_t>(i++)] = 0;
    if (i == n) return found;
  }
}

}  // namespace

void ConstraintsConfig::validate() const {
  auto range = [](const char* what, int lo, int hi) {
    TEMPER_CHECK(lo >= 2 && lo <= hi && hi <= kMaxVars) << "task 'constraints': expected 2 <= " << what << " min <= max <= "
                                                        << kMaxVars << ", got " << lo << " and " << hi;
  };
  range("vars", min_vars, max_vars);
  range("vars (eval)", eval_min_vars < 0 ? min_vars : eval_min_vars, eval_max_vars < 0 ? max_vars : eval_max_vars);
  TEMPER_CHECK(max_value >= 1 && max_value <= kMaxValue)
      << "task 'constraints': max_value: expected 1.." << kMaxValue << ", got " << max_value;
  TEMPER_CHECK(!kinds.empty() && kinds.find_first_not_of("+-<!") == std::string::npos && kinds.find_first_of("+-") != std::string::npos)
      << "task 'constraints': kinds: expected characters of \"+-<!\" including + or - (equations pin values down), got '"
      << kinds << "'";
}

ConstraintsConfig ConstraintsConfig::from_params(const TaskParams& params) {
  ParamReader r("constraints", params);
  ConstraintsConfig c;
  c.seed = r.get_seed("seed", c.seed);
  c.min_vars = static_cast<int>(r.get_int("min_vars", c.min_vars, 2, kMaxVars));
  c.max_vars = static_cast<int>(r.get_int("max_vars", std::max(c.max_vars, c.min_vars), 2, kMaxVars));
  c.eval_min_vars = static_cast<int>(r.get_int("eval_min_vars", -1, -1, kMaxVars));
  c.eval_max_vars = static_cast<int>(r.get_int("eval_max_vars", -1, -1, kMaxVars));
  c.max_value = static_cast<int>(r.get_int("max_value", c.max_value, 1, kMaxValue));
  c.kinds = r.get_string("kinds", c.kinds);
  r.finish();
  c.validate();
  return c;
}

ConstraintsTask::ConstraintsTask(ConstraintsConfig cfg) : cfg_(std::move(cfg)) { cfg_.validate(); }

Problem ConstraintsTask::problem(Split split, uint64_t index) const {
  int lo = cfg_.min_vars, hi = cfg_.max_vars;
  if (split == Split::eval) {
    lo = cfg_.eval_min_vars < 0 ? lo : cfg_.eval_min_vars;
    hi = cfg_.eval_max_vars < 0 ? hi : cfg_.eval_max_vars;
  }
  const std::string kinds = unique_chars(cfg_.kinds);
  Rng rng = problem_rng("constraints", cfg_.seed, split, index);
  for (int attempt = 0; attempt < kMaxGenerateAttempts; ++attempt) {
    const int n = static_cast<int>(rand_int(rng, lo, hi));
    std::vector<int> v(static_cast<size_t>(n));
    for (int& x : v) x = static_cast<int>(rand_int(rng, 0, cfg_.max_value));
    std::vector<Constraint> cs;
    int64_t left = count_solutions(cs, n, cfg_.max_value, 2);
    for (int tries = 0; tries < 8 * n && left > 1; ++tries) {
      Constraint c;
      c.kind = kinds[static_cast<size_t>(rand_int(rng, 0, static_cast<int64_t>(kinds.size()) - 1))];
      c.x = static_cast<int>(rand_int(rng, 0, n - 1));
      c.y = static_cast<int>(rand_int(rng, 0, n - 2));
      if (c.y >= c.x) ++c.y;
      c.k = c.kind == '+' ? v[static_cast<size_t>(c.x)] + v[static_cast<size_t>(c.y)]
            : c.kind == '-' ? v[static_cast<size_t>(c.x)] - v[static_cast<size_t>(c.y)] : 0;
      if (!c.holds(v)) continue;  // < and != must be true of the hidden assignment
      std::vector<Constraint> with = cs;
      with.push_back(c);
      int64_t now = count_solutions(with, n, cfg_.max_value, 1 << 20);
      if (now >= count_solutions(cs, n, cfg_.max_value, 1 << 20)) continue;  // adds nothing
      cs = std::move(with);
      left = now;
    }
    if (left != 1) continue;
    std::string prompt, gold, answer;
    for (size_t i = 0; i < cs.size(); ++i) prompt += (i ? "," : "") + cs[i].text();
    prompt += "?";
    if (split_of(prompt) != split) continue;
    for (int i = 0; i < n; ++i) {
      gold += std::string(1, static_cast<char>('a' + i)) + "=" + std::to_string(v[static_cast<size_t>(i)]) + "\n";
      answer += (i ? "," : "") + std::to_string(v[static_cast<size_t>(i)]);
    }
    Problem p;
    p.id = problem_id("constraints", split, index);
    p.prompt = prompt;
    p.answer = answer;
    p.gold_solution = gold + "#### " + answer;
    p.difficulty = n;
    return p;
  }
  TEMPER_FAIL() << "task 'constraints': no " << split_name(split) << " problem found in " << kMaxGenerateAttempts
                << " attempts; widen max_value or the kinds";
}

Verdict ConstraintsTask::verify(const Problem& p, const std::string& completion) const {
  Verdict v;
  v.extracted = extract_answer(completion);
  if (v.extracted) {
    std::string s;
    for (char c : *v.extracted)
      if (c != ' ') s += c;
    v.extracted = s;
  }
  v.correct = v.extracted && *v.extracted == p.answer;
  v.reward = v.correct ? 1.0 : 0.0;
  return v;
}

}  // namespace temper::tasks
