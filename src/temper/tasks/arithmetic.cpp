#include "temper/tasks/arithmetic.h"

#include <algorithm>
#include <vector>

#include "temper/core/error.h"

namespace temper::tasks {
namespace {

constexpr int kMaxOps = 12;
constexpr int64_t kMaxOperand = 1000000;
constexpr int64_t kMaxValue = 1000000000000000LL;  // |every intermediate value| <= 1e15

std::optional<int64_t> apply(int64_t a, char op, int64_t b) { return exact_int_op(a, op, b, kMaxValue); }

struct Expr {
  std::vector<int64_t> nums;
  std::string ops;  // ops[i] sits between nums[i] and nums[i+1]
  std::string text() const {
    std::string s = std::to_string(nums[0]);
    for (size_t i = 0; i < ops.size(); ++i) s += ops[i] + std::to_string(nums[i + 1]);
    return s;
  }
};

// Evaluate one operation at a time (leftmost * or / first, then leftmost + or -), writing "a op b=c" lines.
std::optional<int64_t> solve(Expr e, std::string* gold) {
  while (!e.ops.empty()) {
    size_t k = e.ops.find_first_of("*/");
    if (k == std::string::npos) k = 0;
    auto r = apply(e.nums[k], e.ops[k], e.nums[k + 1]);
    if (!r) return std::nullopt;
    if (gold) *gold += std::to_string(e.nums[k]) + e.ops[k] + std::to_string(e.nums[k + 1]) + "=" + std::to_string(*r) + "\n";
    e.nums[k] = *r;
    e.nums.erase(e.nums.begin() + static_cast<std::ptrdiff_t>(k) + 1);
    e.ops.erase(k, 1);
  }
  return e.nums[0];
}

std::optional<Expr> generate(Rng& rng, const ArithmeticConfig& c, int nops) {
  Expr e;
  e.nums.push_back(rand_int(rng, 0, c.max_operand));
  int64_t term = e.nums[0];  // value of the current * / chain, to keep divisions exact
  std::string other;         // allowed ops other than '/'
  for (char o : c.ops)
    if (o != '/') other += o;
  for (int k = 0; k < nops; ++k) {
    char op = c.ops[rand_int(rng, 0, static_cast<int64_t>(c.ops.size()) - 1)];
    int64_t x = 0;
    if (op == '/') {
      std::vector<int64_t> divisors;
      int64_t hi = std::min<int64_t>(c.max_operand, 10000);
      if (term != 0) hi = std::min<int64_t>(hi, term < 0 ? -term : term);
      for (int64_t d = 2; d <= hi; ++d)
        if (term % d == 0) divisors.push_back(d);
      if (!divisors.empty()) {
        x = divisors[rand_int(rng, 0, static_cast<int64_t>(divisors.size()) - 1)];
      } else if (!other.empty()) {
        op = other[rand_int(rng, 0, static_cast<int64_t>(other.size()) - 1)];
      } else {
        x = 1;
      }
    }
    if (op != '/') x = rand_int(rng, 0, c.max_operand);
    if (op == '+' || op == '-') {
      term = x;
    } else {
      auto t = apply(term, op, x);
      if (!t) return std::nullopt;
      term = *t;
    }
    e.ops += op;
    e.nums.push_back(x);
  }
  return e;
}

}  // namespace

void ArithmeticConfig::validate() const {
  auto range = [](const char* lo_name, int lo, const char* hi_name, int hi) {
    TEMPER_CHECK(lo >= 1 && hi <= kMaxOps && lo <= hi)
        << "task 'arithmetic': expected 1 <= " << lo_name << " <= " << hi_name << " <= " << kMaxOps << ", got "
        << lo_name << "=" << lo << ", " << hi_name << "=" << hi;
  };
  range("min_ops", min_ops, "max_ops", max_ops);
  range("eval_min_ops", eval_min_ops < 0 ? min_ops : eval_min_ops, "eval_max_ops",
        eval_max_ops < 0 ? max_ops : eval_max_ops);
  TEMPER_CHECK(max_operand >= 1 && max_operand <= kMaxOperand)
      << "task 'arithmetic': max_operand: expected an integer in [1, " << kMaxOperand << "], got " << max_operand;
  bool ok = !ops.empty() && std::all_of(ops.begin(), ops.end(), [](char o) {
    return o == '+' || o == '-' || o == '*' || o == '/';
  });
  TEMPER_CHECK(ok) << "task 'arithmetic': ops: expected a non-empty set of the characters + - * /, got '" << ops << "'";
}

ArithmeticConfig ArithmeticConfig::from_params(const TaskParams& params) {
  ParamReader r("arithmetic", params);
  ArithmeticConfig c;
  c.seed = r.get_seed("seed", c.seed);
  c.min_ops = static_cast<int>(r.get_int("min_ops", c.min_ops, 1, kMaxOps));
  c.max_ops = static_cast<int>(r.get_int("max_ops", std::max(c.max_ops, c.min_ops), 1, kMaxOps));
  c.eval_min_ops = static_cast<int>(r.get_int("eval_min_ops", -1, -1, kMaxOps));
  c.eval_max_ops = static_cast<int>(r.get_int("eval_max_ops", -1, -1, kMaxOps));
  c.max_operand = r.get_int("max_operand", c.max_operand, 1, kMaxOperand);
  c.ops = r.get_string("ops", c.ops);
  c.check_lines = static_cast<int>(r.get_int("check_lines", 0, 0, 16));
  r.finish();
  c.validate();
  return c;
}

ArithmeticTask::ArithmeticTask(ArithmeticConfig cfg) : cfg_(std::move(cfg)) {
  cfg_.validate();
  cfg_.ops = unique_chars(cfg_.ops);
}

Problem ArithmeticTask::problem(Split split, uint64_t index) const {
  int lo = cfg_.min_ops, hi = cfg_.max_ops;
  if (split == Split::eval) {
    lo = cfg_.eval_min_ops < 0 ? lo : cfg_.eval_min_ops;
    hi = cfg_.eval_max_ops < 0 ? hi : cfg_.eval_max_ops;
  }
  Rng rng = problem_rng("arithmetic", cfg_.seed, split, index);
  for (int attempt = 0; attempt < kMaxGenerateAttempts; ++attempt) {
    int nops = static_cast<int>(rand_int(rng, lo, hi));
    auto e = generate(rng, cfg_, nops);
    if (!e) continue;
    std::string text = e->text();
    if (split_of(text) != split) continue;
    std::string gold;
    auto v = solve(*e, &gold);
    if (!v) continue;
    Problem p;
    p.id = problem_id("arithmetic", split, index);
    p.prompt = text + "=";
    p.answer = std::to_string(*v);
    if (cfg_.check_lines > 0) {  // drawn after the problem, so the problems do not depend on check_lines
      std::vector<std::string> steps;
      for (size_t a = 0, b; (b = gold.find('\n', a)) != std::string::npos; a = b + 1) steps.push_back(gold.substr(a, b - a));
      int64_t k = rand_int(rng, 0, cfg_.check_lines);
      for (int64_t i = 0; i < k; ++i) gold += "check " + steps[static_cast<size_t>(rand_int(rng, 0, static_cast<int64_t>(steps.size()) - 1))] + "\n";
    }
    p.gold_solution = gold + "#### " + p.answer;
    p.difficulty = nops;
    return p;
  }
  TEMPER_FAIL() << "task 'arithmetic': no " << split_name(split) << " problem found in " << kMaxGenerateAttempts
                << " attempts; the problem space is too small (raise max_operand or max_ops)";
}

Verdict ArithmeticTask::verify(const Problem& p, const std::string& completion) const {
  Verdict v;
  v.extracted = extract_answer(completion);
  auto want = parse_int(p.answer);
  TEMPER_CHECK(want.has_value()) << "arithmetic problem " << p.id << ": answer '" << p.answer << "' is not an integer";
  if (v.extracted) {
    auto got = parse_int(*v.extracted);
    v.correct = got && *got == *want;
  }
  v.reward = v.correct ? 1.0 : 0.0;
  return v;
}

std::vector<std::string> ArithmeticTask::intermediate_states(const Problem&, const std::string& completion) const {
  std::vector<std::string> out;
  for (std::string_view line : reasoning_lines(completion)) {
    size_t eq = line.rfind('=');
    if (eq == std::string_view::npos || eq == 0) continue;
    if (auto v = parse_int(line.substr(eq + 1))) out.push_back(std::to_string(*v));
  }
  return out;
}

}  // namespace temper::tasks
