#include "temper/tasks/countdown.h"

#include <algorithm>
#include <array>
#include <map>
#include <set>

#include "temper/core/error.h"

namespace temper::tasks {
namespace {

constexpr int kMaxNumbers = 8;
constexpr int64_t kMaxValue = 1000000000;  // literal and intermediate bound (keeps lines short, no overflow)

bool valid_op(char o) { return o == '+' || o == '-' || o == '*' || o == '/'; }

std::optional<int64_t> apply(int64_t a, char op, int64_t b) { return exact_int_op(a, op, b, kMaxValue); }

// Recursive descent over expr := term (('+'|'-') term)*, term := factor (('*'|'/') factor)*,
// factor := literal | '(' expr ')'.
class ExprParser {
 public:
  ExprParser(std::string_view s, std::string_view allowed) : s_(s), allowed_(allowed) {}
  std::optional<int64_t> parse_all(std::vector<int64_t>* literals) {
    auto v = expr(0);
    skip();
    if (!v || i_ != s_.size()) return std::nullopt;
    *literals = std::move(literals_);
    return v;
  }

 private:
  void skip() {
    while (i_ < s_.size() && s_[i_] == ' ') ++i_;
  }
  bool take_op(const char* set, char* op) {
    skip();
    if (i_ < s_.size() && std::string_view(set).find(s_[i_]) != std::string_view::npos) {
      *op = s_[i_++];
      return true;
    }
    return false;
  }
  std::optional<int64_t> binary(int depth, bool additive) {
    auto lhs = additive ? binary(depth, false) : factor(depth);
    char op = 0;
    while (lhs && take_op(additive ? "+-" : "*/", &op)) {
      if (allowed_.find(op) == std::string_view::npos) return std::nullopt;
      auto rhs = additive ? binary(depth, false) : factor(depth);
      if (!rhs) return std::nullopt;
      lhs = apply(*lhs, op, *rhs);
    }
    return lhs;
  }
  std::optional<int64_t> expr(int depth) { return depth > 64 ? std::nullopt : binary(depth, true); }
  std::optional<int64_t> factor(int depth) {
    skip();
    if (i_ < s_.size() && s_[i_] == '(') {
      ++i_;
      auto v = expr(depth + 1);
      skip();
      if (!v || i_ >= s_.size() || s_[i_] != ')') return std::nullopt;
      ++i_;
      return v;
    }
    size_t b = i_;
    int64_t v = 0;
    while (i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9') {
      v = v * 10 + (s_[i_++] - '0');
      if (v > kMaxValue) return std::nullopt;
    }
    if (i_ == b) return std::nullopt;
    literals_.push_back(v);
    return v;
  }

  std::string_view s_, allowed_;
  size_t i_ = 0;
  std::vector<int64_t> literals_;
};

// A value with the expression that made it and that expression's precedence (3 literal, 2 * /, 1 + -).
struct Node {
  int64_t v;
  std::string expr;
  int prec;
};

std::string wrap(const Node& n, bool parens) { return parens ? "(" + n.expr + ")" : n.expr; }

struct Generated {
  std::vector<int64_t> numbers;
  int64_t target = 0;
  std::string steps, expr;
  int nsteps = 0;
};

std::optional<Generated> generate(Rng& rng, const CountdownConfig& c, int nsteps) {
  Generated g;
  for (int k = 0; k < c.numbers; ++k) g.numbers.push_back(rand_int(rng, 1, c.max_number));
  // nsteps + 1 of the numbers (a random subset) are merged into one value in nsteps steps; the rest are
  // distractors. Every step's result is used by a later step, the last one is the target.
  std::vector<int64_t> order = g.numbers;
  for (int64_t k = static_cast<int64_t>(order.size()) - 1; k > 0; --k) std::swap(order[k], order[rand_int(rng, 0, k)]);
  std::vector<Node> pool;
  for (int k = 0; k <= nsteps; ++k) pool.push_back({order[k], std::to_string(order[k]), 3});
  const int64_t cap = std::max(c.max_target, c.max_number) * c.max_number;
  for (int s = 0; s < nsteps; ++s) {
    bool found = false;
    for (int tries = 0; tries < 32 && !found; ++tries) {
      int64_t n = static_cast<int64_t>(pool.size());
      int64_t i = rand_int(rng, 0, n - 1), j = rand_int(rng, 0, n - 2);
      if (j >= i) ++j;
      char op = c.ops[rand_int(rng, 0, static_cast<int64_t>(c.ops.size()) - 1)];
      Node a = pool[i], b = pool[j];
      if (a.v < b.v) std::swap(a, b);
      bool ok = (op == '+') || (op == '-' && a.v > b.v) || (op == '*' && a.v > 1 && b.v > 1 && a.v * b.v <= cap) ||
                (op == '/' && b.v > 1 && a.v % b.v == 0);
      auto rv = ok ? apply(a.v, op, b.v) : std::nullopt;
      if (!rv) continue;
      Node r;
      r.v = *rv;
      switch (op) {
        case '+': r.expr = a.expr + "+" + b.expr, r.prec = 1; break;
        case '-': r.expr = a.expr + "-" + wrap(b, b.prec <= 1), r.prec = 1; break;
        case '*': r.expr = wrap(a, a.prec < 2) + "*" + wrap(b, b.prec < 2), r.prec = 2; break;
        default: r.expr = wrap(a, a.prec < 2) + "/" + wrap(b, b.prec <= 2), r.prec = 2; break;
      }
      g.steps += std::to_string(a.v) + op + std::to_string(b.v) + "=" + std::to_string(r.v) + "\n";
      pool.erase(pool.begin() + std::max(i, j));
      pool.erase(pool.begin() + std::min(i, j));
      pool.push_back(r);
      found = true;
    }
    if (!found) return std::nullopt;
  }
  g.target = pool[0].v;
  g.expr = pool[0].expr;
  g.nsteps = nsteps;
  if (g.target < 1 || g.target > c.max_target) return std::nullopt;
  if (std::find(g.numbers.begin(), g.numbers.end(), g.target) != g.numbers.end()) return std::nullopt;
  return g;
}

std::string canonical(std::vector<int64_t> numbers, int64_t target) {
  std::sort(numbers.begin(), numbers.end());
  std::string s;
  for (int64_t n : numbers) s += std::to_string(n) + " ";
  return s + "-> " + std::to_string(target);
}

// "a op b=c" (spaces allowed) -> (a, b, c).
std::optional<std::array<int64_t, 3>> parse_step(std::string_view line) {
  size_t eq = line.find('=');
  if (eq == std::string_view::npos) return std::nullopt;
  std::string_view lhs = line.substr(0, eq);
  size_t op = lhs.find_first_of("+-*/", lhs.find_first_not_of(' ') + 1);
  if (op == std::string_view::npos) return std::nullopt;
  auto a = parse_int(lhs.substr(0, op)), b = parse_int(lhs.substr(op + 1)), c = parse_int(line.substr(eq + 1));
  if (!a || !b || !c) return std::nullopt;
  return std::array<int64_t, 3>{*a, *b, *c};
}

}  // namespace

std::optional<std::pair<std::vector<int64_t>, int64_t>> countdown_parse_prompt(std::string_view prompt) {
  size_t arrow = prompt.find("->");
  size_t colon = prompt.rfind(':');
  if (arrow == std::string_view::npos || colon == std::string_view::npos || colon < arrow) return std::nullopt;
  std::vector<int64_t> nums;
  std::string_view head = prompt.substr(0, arrow);
  size_t i = 0;
  while (i < head.size()) {
    while (i < head.size() && head[i] == ' ') ++i;
    size_t b = i;
    while (i < head.size() && head[i] != ' ') ++i;
    if (i > b) {
      auto v = parse_int(head.substr(b, i - b));
      if (!v) return std::nullopt;
      nums.push_back(*v);
    }
  }
  auto target = parse_int(prompt.substr(arrow + 2, colon - arrow - 2));
  if (!target || nums.empty()) return std::nullopt;
  return std::make_pair(nums, *target);
}

std::optional<int64_t> countdown_eval(std::string_view expr, const std::vector<int64_t>& numbers,
                                      std::string_view allowed_ops) {
  std::vector<int64_t> literals;
  auto v = ExprParser(expr, allowed_ops).parse_all(&literals);
  if (!v) return std::nullopt;
  std::map<int64_t, int> avail;
  for (int64_t n : numbers) ++avail[n];
  for (int64_t l : literals)
    if (--avail[l] < 0) return std::nullopt;
  return v;
}

void CountdownConfig::validate() const {
  TEMPER_CHECK(numbers >= 2 && numbers <= kMaxNumbers)
      << "task 'countdown': numbers: expected an integer in [2, " << kMaxNumbers << "], got " << numbers;
  TEMPER_CHECK(max_number >= 2 && max_number <= 1000)
      << "task 'countdown': max_number: expected an integer in [2, 1000], got " << max_number;
  TEMPER_CHECK(max_target >= 2 && max_target <= 1000000)
      << "task 'countdown': max_target: expected an integer in [2, 1000000], got " << max_target;
  int hi = max_steps < 0 ? numbers - 1 : max_steps;
  TEMPER_CHECK(min_steps >= 1 && min_steps <= hi && hi <= numbers - 1)
      << "task 'countdown': expected 1 <= min_steps <= max_steps <= numbers - 1 = " << numbers - 1
      << ", got min_steps=" << min_steps << ", max_steps=" << hi;
  int elo = eval_min_steps < 0 ? min_steps : eval_min_steps, ehi = eval_max_steps < 0 ? hi : eval_max_steps;
  TEMPER_CHECK(elo >= 1 && elo <= ehi && ehi <= numbers - 1)
      << "task 'countdown': expected 1 <= eval_min_steps <= eval_max_steps <= numbers - 1 = " << numbers - 1
      << ", got eval_min_steps=" << elo << ", eval_max_steps=" << ehi;
  bool ok = !ops.empty() && std::all_of(ops.begin(), ops.end(), valid_op);
  TEMPER_CHECK(ok) << "task 'countdown': ops: expected a non-empty set of the characters + - * /, got '" << ops << "'";
}

CountdownConfig CountdownConfig::from_params(const TaskParams& params) {
  ParamReader r("countdown", params);
  CountdownConfig c;
  c.seed = r.get_seed("seed", c.seed);
  c.numbers = static_cast<int>(r.get_int("numbers", c.numbers, 2, kMaxNumbers));
  c.max_number = r.get_int("max_number", c.max_number, 2, 1000);
  c.max_target = r.get_int("max_target", c.max_target, 2, 1000000);
  c.min_steps = static_cast<int>(r.get_int("min_steps", c.min_steps, 1, kMaxNumbers - 1));
  c.max_steps = static_cast<int>(r.get_int("max_steps", -1, -1, kMaxNumbers - 1));
  c.eval_min_steps = static_cast<int>(r.get_int("eval_min_steps", -1, -1, kMaxNumbers - 1));
  c.eval_max_steps = static_cast<int>(r.get_int("eval_max_steps", -1, -1, kMaxNumbers - 1));
  c.ops = r.get_string("ops", c.ops);
  r.finish();
  c.validate();
  return c;
}

CountdownTask::CountdownTask(CountdownConfig cfg) : cfg_(std::move(cfg)) {
  cfg_.validate();
  if (cfg_.max_steps < 0) cfg_.max_steps = cfg_.numbers - 1;
  cfg_.ops = unique_chars(cfg_.ops);
}

Problem CountdownTask::problem(Split split, uint64_t index) const {
  int lo = cfg_.min_steps, hi = cfg_.max_steps;
  if (split == Split::eval) {
    lo = cfg_.eval_min_steps < 0 ? lo : cfg_.eval_min_steps;
    hi = cfg_.eval_max_steps < 0 ? hi : cfg_.eval_max_steps;
  }
  Rng rng = problem_rng("countdown", cfg_.seed, split, index);
  for (int attempt = 0; attempt < kMaxGenerateAttempts; ++attempt) {
    auto g = generate(rng, cfg_, static_cast<int>(rand_int(rng, lo, hi)));
    if (!g || split_of(canonical(g->numbers, g->target)) != split) continue;
    TEMPER_CHECK(countdown_eval(g->expr, g->numbers, cfg_.ops) == g->target)
        << "countdown: gold expression " << g->expr << " does not reach " << g->target;
    Problem p;
    p.id = problem_id("countdown", split, index);
    for (int64_t n : g->numbers) p.prompt += std::to_string(n) + " ";
    p.prompt += "-> " + std::to_string(g->target) + ":";
    p.answer = g->expr;
    p.gold_solution = g->steps + "#### " + g->expr;
    p.difficulty = g->nsteps;
    return p;
  }
  TEMPER_FAIL() << "task 'countdown': no " << split_name(split) << " problem found in " << kMaxGenerateAttempts
                << " attempts; raise max_number or max_target";
}

Verdict CountdownTask::verify(const Problem& p, const std::string& completion) const {
  auto q = countdown_parse_prompt(p.prompt);
  TEMPER_CHECK(q.has_value()) << "countdown problem " << p.id << ": prompt '" << p.prompt
                              << "' is not 'n1 n2 ... -> target:'";
  Verdict v;
  v.extracted = extract_answer(completion);
  if (v.extracted) {
    std::string_view expr = *v.extracted;
    bool target_ok = true;
    size_t eq = expr.find('=');
    if (eq != std::string_view::npos) {
      auto rhs = parse_int(expr.substr(eq + 1));
      target_ok = rhs && *rhs == q->second;
      expr = expr.substr(0, eq);
    }
    auto value = countdown_eval(expr, q->first, cfg_.ops);
    v.correct = target_ok && value && *value == q->second;
  }
  v.reward = v.correct ? 1.0 : 0.0;
  return v;
}

std::vector<std::string> CountdownTask::intermediate_states(const Problem& p, const std::string& completion) const {
  std::vector<std::string> out;
  auto q = countdown_parse_prompt(p.prompt);
  if (!q) return out;
  std::multiset<int64_t> avail(q->first.begin(), q->first.end());
  for (std::string_view line : reasoning_lines(completion)) {
    auto st = parse_step(line);
    if (!st) continue;
    auto ia = avail.find((*st)[0]);
    if (ia == avail.end()) break;
    avail.erase(ia);
    auto ib = avail.find((*st)[1]);
    if (ib == avail.end()) break;
    avail.erase(ib);
    avail.insert((*st)[2]);
    std::string s;
    for (int64_t n : avail) s += (s.empty() ? "" : " ") + std::to_string(n);
    out.push_back(s);
  }
  return out;
}

}  // namespace temper::tasks
