#include "temper/env/calculator_env.h"

#include <cmath>
#include <limits>

#include "temper/core/error.h"
#include "temper/core/rng.h"

namespace temper::env {

namespace {

using ojson = nlohmann::ordered_json;

constexpr uint64_t kFamily = 0x63616c63756c61ull;  // "calcula"
constexpr size_t kMaxExpression = 2000;
constexpr int kMaxDepth = 100;

// Uniform in [lo, hi] from 64 random bits, rejecting the biased tail.
int64_t draw(Rng& rng, int64_t lo, int64_t hi) {
  const uint64_t span = static_cast<uint64_t>(hi - lo) + 1;
  const uint64_t limit =
      span == 0 ? 0 : std::numeric_limits<uint64_t>::max() - std::numeric_limits<uint64_t>::max() % span;
  for (;;) {
    const uint64_t x = (static_cast<uint64_t>(rng.next_u32()) << 32) | rng.next_u32();
    if (span == 0) return static_cast<int64_t>(x);
    if (x < limit) return lo + static_cast<int64_t>(x % span);
  }
}

int64_t pow10(int64_t d) {
  int64_t p = 1;
  for (int64_t i = 0; i < d; ++i) p *= 10;
  return p;
}

int64_t operand(Rng& rng, const CalculatorOptions& o) {
  const int64_t d = draw(rng, o.min_digits, o.max_digits);
  return draw(rng, d == 1 ? 1 : pow10(d - 1), pow10(d) - 1);
}

std::string listing(const std::vector<int64_t>& xs, size_t from) {  // "a, b and c"
  std::string out;
  for (size_t i = from; i < xs.size(); ++i) {
    if (i > from) out += i + 1 == xs.size() ? " and " : ", ";
    out += std::to_string(xs[i]);
  }
  return out;
}

void range_param(const ojson& params, const char* key, int64_t lo_ok, int64_t hi_ok, int64_t& lo, int64_t& hi) {
  auto it = params.find(key);
  if (it == params.end()) return;
  const ojson& v = *it;
  if (v.is_number_integer()) {
    lo = hi = v.get<int64_t>();
  } else {
    TEMPER_CHECK(v.is_array() && v.size() == 2 && v[0].is_number_integer() && v[1].is_number_integer())
        << "env 'calculator': param " << key << " must be an integer or [lo, hi], got " << v.dump();
    lo = v[0].get<int64_t>(), hi = v[1].get<int64_t>();
  }
  TEMPER_CHECK(lo_ok <= lo && lo <= hi && hi <= hi_ok) << "env 'calculator': param " << key << " must lie in [" << lo_ok
                                                       << ", " << hi_ok << "] with lo <= hi, got " << v.dump();
}

// Recursive descent: expr = term {(+|-) term}; term = factor {(*|/) factor}; factor = (+|-) factor | number |
// '(' expr ')'. The first error wins.
class Evaluator {
 public:
  explicit Evaluator(std::string_view s) : s_(s) {}
  CalcResult run() {
    CalcResult r;
    skip();
    if (i_ >= s_.size()) {
      r.error = "empty expression";
      return r;
    }
    int64_t v = 0;
    if (expr(v, 0)) {
      skip();
      if (i_ < s_.size()) fail_here();
    }
    if (!err_.empty()) {
      r.error = err_;
      return r;
    }
    r.ok = true;
    r.value = v;
    return r;
  }

 private:
  void skip() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n' || s_[i_] == '\r')) ++i_;
  }
  bool fail(const std::string& e) {
    if (err_.empty()) err_ = e;
    return false;
  }
  bool fail_here() {
    if (i_ >= s_.size()) return fail("the expression ends too early");
    return fail("unexpected '" + std::string(1, s_[i_]) + "' at character " + std::to_string(i_ + 1));
  }
  bool overflow() { return fail("overflow: the result does not fit in 64 bits (+-9.2e18)"); }
  bool expr(int64_t& v, int depth) {
    if (!term(v, depth)) return false;
    for (;;) {
      skip();
      if (i_ >= s_.size() || (s_[i_] != '+' && s_[i_] != '-')) return true;
      const char op = s_[i_++];
      int64_t b = 0;
      if (!term(b, depth)) return false;
      if (op == '+' ? __builtin_add_overflow(v, b, &v) : __builtin_sub_overflow(v, b, &v)) return overflow();
    }
  }
  bool term(int64_t& v, int depth) {
    if (!factor(v, depth)) return false;
    for (;;) {
      skip();
      if (i_ >= s_.size() || (s_[i_] != '*' && s_[i_] != '/')) return true;
      const char op = s_[i_++];
      int64_t b = 0;
      if (!factor(b, depth)) return false;
      if (op == '*') {
        if (__builtin_mul_overflow(v, b, &v)) return overflow();
      } else {
        if (b == 0) return fail("division by zero");
        if (v == std::numeric_limits<int64_t>::min() && b == -1) return overflow();
        if (v % b != 0)
          return fail(std::to_string(v) + " / " + std::to_string(b) +
                      " is not a whole number (the calculator divides whole numbers exactly)");
        v /= b;
      }
    }
  }
  bool factor(int64_t& v, int depth) {
    if (depth > kMaxDepth) return fail("too deeply nested (over " + std::to_string(kMaxDepth) + " levels)");
    skip();
    if (i_ >= s_.size()) return fail_here();
    const char c = s_[i_];
    if (c == '+' || c == '-') {
      ++i_;
      if (!factor(v, depth + 1)) return false;
      if (c == '-') {
        if (v == std::numeric_limits<int64_t>::min()) return overflow();
        v = -v;
      }
      return true;
    }
    if (c == '(') {
      ++i_;
      if (!expr(v, depth + 1)) return false;
      skip();
      if (i_ >= s_.size() || s_[i_] != ')') return i_ >= s_.size() ? fail("missing ')'") : fail_here();
      ++i_;
      return true;
    }
    if (c >= '0' && c <= '9') {
      const size_t start = i_;
      int64_t x = 0;
      while (i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9') {
        if (__builtin_mul_overflow(x, int64_t{10}, &x) || __builtin_add_overflow(x, int64_t{s_[i_] - '0'}, &x))
          return fail("the number at character " + std::to_string(start + 1) + " is too large");
        ++i_;
      }
      v = x;
      return true;
    }
    return fail_here();
  }

  std::string_view s_;
  size_t i_ = 0;
  std::string err_;
};

}  // namespace

const char* const kCalculatorSystemPrompt =
    "You solve arithmetic word problems. You have a calculator tool: call it with an arithmetic expression "
    "(whole numbers, + - * /, parentheses) and it returns the exact result. Use it for the arithmetic. When you "
    "know the answer, reply without a tool call and end your reply with the final number.";

const char* const kCalculatorNoToolPrompt =
    "You solve arithmetic word problems. Work the arithmetic out yourself and end your reply with the final number.";

CalculatorOptions CalculatorOptions::from_params(const ojson& params) {
  TEMPER_CHECK(params.is_object()) << "env 'calculator': params must be an object, got " << params.dump();
  for (auto& [k, v] : params.items())
    TEMPER_CHECK(k == "digits" || k == "operands" || k == "seed" || k == "malformed_penalty" || k == "tool")
        << "env 'calculator': no param '" << k << "' (known: digits, operands, seed, malformed_penalty, tool)";
  CalculatorOptions o;
  range_param(params, "digits", 1, 9, o.min_digits, o.max_digits);
  range_param(params, "operands", 2, 10, o.min_operands, o.max_operands);
  if (auto s = params.find("seed"); s != params.end()) {
    TEMPER_CHECK(s->is_number_integer() && s->get<int64_t>() >= 0)
        << "env 'calculator': param seed must be an integer >= 0, got " << s->dump();
    o.seed = s->get<uint64_t>();
  }
  if (auto t = params.find("tool"); t != params.end()) {
    TEMPER_CHECK(t->is_boolean()) << "env 'calculator': param tool must be true or false, got " << t->dump();
    o.tool = t->get<bool>();
  }
  if (auto p = params.find("malformed_penalty"); p != params.end()) {
    TEMPER_CHECK(p->is_number() && std::isfinite(p->get<double>()) && p->get<double>() >= 0)
        << "env 'calculator': param malformed_penalty must be a number >= 0, got " << p->dump();
    o.malformed_penalty = p->get<double>();
  }
  return o;
}

CalculatorProblem calculator_problem(const CalculatorOptions& o, uint64_t seed, bool eval, uint64_t index) {
  Rng rng(mix_seed(seed, kFamily), 2 * index + (eval ? 1 : 0));
  CalculatorProblem p;
  const int64_t kind = draw(rng, 0, 2);
  const int64_t k = draw(rng, o.min_operands, o.max_operands);
  const int64_t context = draw(rng, 0, 2);
  std::vector<int64_t> xs;
  for (int64_t i = 0; i < k; ++i) xs.push_back(operand(rng, o));
  const std::string n = std::to_string(k);
  if (kind == 0) {
    p.kind = "sum";
    for (int64_t x : xs) p.answer += x;
    static const char* const kSum[3][3] = {
        {"A warehouse received ", " units in ", " deliveries. How many units did it receive in total?"},
        {"A website had ", " visitors on ", " days. How many visitors did it have over those days?"},
        {"A farm harvested ", " kilograms of grain from ", " fields. How many kilograms did it harvest in total?"}};
    const auto& t = kSum[context];
    p.question = t[0] + listing(xs, 0) + t[1] + n + t[2];
  } else if (kind == 1) {
    p.kind = "balance";
    static const char* const kUnit[3] = {"dollars", "euros", "points"};
    const std::string unit = kUnit[context];
    p.answer = xs[0];
    p.question = "An account holds " + std::to_string(xs[0]) + " " + unit + ". Then, in order:";
    for (size_t i = 1; i < xs.size(); ++i) {
      bool withdraw = draw(rng, 0, 1) == 1 && p.answer >= xs[i];  // never below zero
      p.answer += withdraw ? -xs[i] : xs[i];
      p.question += std::string(i > 1 ? (i + 1 == xs.size() ? " and" : ",") : "") +
                    (withdraw ? " a withdrawal of " : " a deposit of ") + std::to_string(xs[i]) + " " + unit;
    }
    p.question += ". How many " + unit + " does it hold at the end?";
  } else {
    p.kind = "product";
    static const char* const kProd[3][3] = {{"A factory filled ", " crates with ", " bottles"},
                                            {"A shop stacked ", " boxes with ", " pencils"},
                                            {"A builder loaded ", " trucks with ", " bricks"}};
    static const char* const kThing[3] = {"bottles", "pencils", "bricks"};
    const auto& t = kProd[context];
    p.answer = xs[0] * xs[1];  // at most 9 + 9 digits: fits
    p.question = t[0] + std::to_string(xs[0]) + t[1] + std::to_string(xs[1]) + t[2] + " each.";
    for (size_t i = 2; i < xs.size(); ++i) p.answer += xs[i];
    if (xs.size() == 3)
      p.question += " It also has " + std::to_string(xs[2]) + " loose " + kThing[context] + ".";
    else if (xs.size() > 3)
      p.question += " It also has " + listing(xs, 2) + " loose " + kThing[context] + " in " +
                    std::to_string(xs.size() - 2) + " other places.";
    p.question += std::string(" How many ") + kThing[context] + " are there in total?";
  }
  return p;
}

CalcResult calculator_evaluate(std::string_view expression) {
  if (expression.size() > kMaxExpression) {
    CalcResult r;
    r.error = "the expression is too long (over " + std::to_string(kMaxExpression) + " characters)";
    return r;
  }
  return Evaluator(expression).run();
}

ojson calculator_tool_schema() {
  return ojson::parse(R"({"type": "function", "function": {"name": "calculator",
    "description": "Evaluate an arithmetic expression exactly: whole numbers, + - * /, parentheses.",
    "parameters": {"type": "object", "properties": {"expression": {"type": "string",
    "description": "The expression, e.g. 123456 + 789012 * 3"}}, "required": ["expression"]}}})");
}

EnvReply CalculatorEnvironment::reset(const std::string& episode, const ojson& row) {
  EnvReply r;
  State st;
  std::string question;
  try {
    TEMPER_CHECK(row.is_object()) << "env 'calculator': the row must be an object, got " << row.dump();
    if (auto q = row.find("question"); q != row.end()) {
      TEMPER_CHECK(q->is_string()) << "env 'calculator': row.question must be a string";
      auto a = row.find("answer");
      TEMPER_CHECK(a != row.end()) << "env 'calculator': a row with a question needs an \"answer\" (an integer)";
      if (a->is_number_integer()) {
        st.answer = a->get<int64_t>();
      } else {
        TEMPER_CHECK(a->is_string()) << "env 'calculator': row.answer must be an integer, got " << a->dump();
        const std::optional<std::string> n = last_number(a->get<std::string>());
        CalcResult v = n ? calculator_evaluate(*n) : CalcResult{};
        TEMPER_CHECK(v.ok && std::to_string(v.value) == *n)
            << "env 'calculator': row.answer must be an integer, got " << a->dump();
        st.answer = v.value;
      }
      question = q->get<std::string>();
    } else {
      const RowDraw d = row_draw(row, opt_.seed, "calculator");
      CalculatorProblem p = calculator_problem(opt_, d.seed, d.eval, d.index);
      st.answer = p.answer;
      question = std::move(p.question);
    }
  } catch (const Error& e) {
    r.ok = false;
    r.error = e.what();
    ++failures_;
    return r;
  }
  r.messages = ojson::array(
      {ojson{{"role", "system"}, {"content", opt_.tool ? kCalculatorSystemPrompt : kCalculatorNoToolPrompt}},
       ojson{{"role", "user"}, {"content", question}}});
  if (opt_.tool) r.tools = ojson::array({calculator_tool_schema()});
  std::lock_guard<std::mutex> lock(mu_);
  episodes_[episode] = st;
  return r;
}

EnvReply CalculatorEnvironment::step(const std::string& episode, const ojson& message) {
  EnvReply r;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = episodes_.find(episode);
  if (it == episodes_.end()) {
    r.ok = false;
    r.error = "env 'calculator': step for episode '" + episode + "', which was never reset or is closed";
    return r;
  }
  State& st = it->second;
  ++st.turns;
  const std::vector<ToolCall> calls = message_tool_calls(message);
  const std::vector<std::string> errors = message_parse_errors(message);
  if (calls.empty() && errors.empty()) {  // the final answer
    const std::optional<std::string> got = last_number(message_text(message));
    const bool ok = got && *got == std::to_string(st.answer);
    r.reward = ok ? 1 : 0;
    r.correct = ok;
    r.done = true;
    r.components = {{"turns", static_cast<double>(st.turns)},
                    {"tool_calls", static_cast<double>(st.tool_calls)},
                    {"tool_errors", static_cast<double>(st.tool_errors)},
                    {"malformed", static_cast<double>(st.malformed)}};
    r.info = "answer " + std::to_string(st.answer) + ", got " + (got ? *got : std::string("no number"));
    return r;
  }
  for (const ToolCall& c : calls) {
    ++st.tool_calls;
    std::string content;
    if (!opt_.tool) {
      content = "error: no tools in this conversation; answer with the final number";
    } else if (c.name != "calculator") {
      content = "error: unknown tool '" + c.name + "'; the only tool is calculator";
    } else if (!c.arguments_error.empty()) {
      content = "error: " + c.arguments_error;
    } else if (!c.arguments.contains("expression") || !c.arguments["expression"].is_string()) {
      content = "error: the arguments must be {\"expression\": \"...\"}";
    } else {
      const CalcResult v = calculator_evaluate(c.arguments["expression"].get<std::string>());
      content = v.ok ? std::to_string(v.value) : "error: " + v.error;
    }
    if (content.rfind("error: ", 0) == 0) ++st.tool_errors;
    ojson m = {{"role", "tool"}};
    if (!c.id.empty()) m["tool_call_id"] = c.id;
    m["name"] = "calculator";
    m["content"] = content;
    r.messages.push_back(std::move(m));
  }
  if (!errors.empty()) {
    ++st.malformed;
    std::string text = "Your tool call could not be read: ";
    for (size_t i = 0; i < errors.size(); ++i) text += (i ? "; " : "") + errors[i];
    text +=
        ". Call the calculator with a JSON object {\"name\": \"calculator\", \"arguments\": {\"expression\": "
        "\"...\"}}.";
    r.messages.push_back(ojson{{"role", "user"}, {"content", text}});
    r.reward = -opt_.malformed_penalty;
  }
  return r;
}

void CalculatorEnvironment::close(const std::string& episode) {
  std::lock_guard<std::mutex> lock(mu_);
  episodes_.erase(episode);
}

}  // namespace temper::env
