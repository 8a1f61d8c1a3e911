// Procedural task families (arithmetic, countdown, string_ops): gold solutions verify to reward 1 at several
// difficulties and perturbed answers to 0; problems are deterministic in (seed, split, index) and differ across
// seeds; train and eval never share a problem; intermediate states follow the gold steps; parameter errors name
// the parameter, the expected form and the value.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <stdexcept>

#include "common/scratch.h"
#include "temper/core/error.h"
#include "temper/core/log.h"
#include "temper/reward/safe_reward.h"
#include "temper/tasks/arithmetic.h"
#include "temper/tasks/countdown.h"
#include "temper/tasks/constraints.h"
#include "temper/tasks/string_ops.h"
#include "temper/tasks/task.h"

using namespace temper;
using namespace temper::tasks;
using temper::test::expect_error;

namespace {

// Replace the text after the final "#### ".
std::string with_answer(const std::string& gold, const std::string& answer) {
  size_t p = gold.rfind("#### ");
  return gold.substr(0, p) + "#### " + answer;
}

bool printable_ascii(const std::string& s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return c == '\n' || (c >= ' ' && c < 127); });
}

std::vector<std::string> lines_of(const std::string& s) {
  std::vector<std::string> out;
  size_t b = 0;
  while (b <= s.size()) {
    size_t e = s.find('\n', b);
    if (e == std::string::npos) e = s.size();
    out.push_back(s.substr(b, e - b));
    b = e + 1;
  }
  return out;
}

// Independent evaluator for "a+b*c-d/e" (no parentheses): * and / first, left to right.
int64_t eval_flat(const std::string& e) {
  std::vector<int64_t> terms;
  std::vector<char> add_ops;
  size_t i = 0;
  auto number = [&] {
    int64_t v = 0;
    while (i < e.size() && isdigit(static_cast<unsigned char>(e[i]))) v = v * 10 + (e[i++] - '0');
    return v;
  };
  int64_t term = number();
  while (i < e.size()) {
    char op = e[i++];
    int64_t x = number();
    if (op == '*') {
      term *= x;
    } else if (op == '/') {
      EXPECT_EQ(term % x, 0) << e;
      term /= x;
    } else {
      terms.push_back(term);
      add_ops.push_back(op);
      term = x;
    }
  }
  terms.push_back(term);
  int64_t v = terms[0];
  for (size_t k = 0; k < add_ops.size(); ++k) v = add_ops[k] == '+' ? v + terms[k + 1] : v - terms[k + 1];
  return v;
}

// Gold verifies (reward 1, extracted == answer), its last line is "#### answer", text is short printable ASCII.
void check_gold(const Task& t, Split split, int n, size_t max_chars = 256) {
  for (int i = 0; i < n; ++i) {
    Problem p = t.problem(split, static_cast<uint64_t>(i));
    ASSERT_EQ(p.id, t.name() + "/" + split_name(split) + "/" + std::to_string(i));
    Verdict v = t.verify(p, p.gold_solution);
    ASSERT_EQ(v.reward, 1.0) << p.prompt << "\n" << p.gold_solution;
    ASSERT_TRUE(v.correct);
    ASSERT_EQ(v.extracted, p.answer);
    ASSERT_EQ(lines_of(p.gold_solution).back(), "#### " + p.answer);
    ASSERT_TRUE(printable_ascii(p.prompt) && printable_ascii(p.gold_solution)) << p.prompt;
    ASSERT_LE(p.prompt.size() + p.gold_solution.size(), max_chars) << p.prompt << p.gold_solution;
    ASSERT_GE(p.difficulty, 1);
  }
}

// Countdown prompts list numbers in random order: canonical = sorted numbers and target.
std::string countdown_key(const std::string& prompt) {
  auto q = countdown_parse_prompt(prompt);
  EXPECT_TRUE(q.has_value()) << prompt;
  std::sort(q->first.begin(), q->first.end());
  std::string k;
  for (int64_t n : q->first) k += std::to_string(n) + " ";
  return k + "-> " + std::to_string(q->second);
}

}  // namespace

// ---- Fixed examples (also pin generation across platforms and refactors) ------------------------------------

TEST(Tasks, FirstProblemsArePinned) {
  auto a = make_task("arithmetic", {{"seed", "1"}});
  Problem pa = a->problem(Split::train, 0);
  auto c = make_task("countdown", {{"seed", "1"}});
  Problem pc = c->problem(Split::train, 0);
  auto s = make_task("string_ops", {{"seed", "1"}});
  Problem ps = s->problem(Split::train, 0);
  EXPECT_EQ(pa.prompt, "16*16-8-13=");
  EXPECT_EQ(pa.gold_solution, "16*16=256\n256-8=248\n248-13=235\n#### 235");
  EXPECT_EQ(pc.prompt, "3 23 5 6 -> 32:");
  EXPECT_EQ(pc.gold_solution, "23+6=29\n29+3=32\n#### 23+6+3");
  EXPECT_EQ(ps.prompt, "rhumx|rotr=");
  EXPECT_EQ(ps.gold_solution, "rotr=xrhum\n#### xrhum");
}

// ---- Arithmetic ----------------------------------------------------------------------------------------------

TEST(Arithmetic, GoldVerifiesAtEveryDifficulty) {
  for (auto [ops, lo, hi, maxop] : std::vector<std::tuple<const char*, int, int, int>>{
           {"+-*", 1, 1, 9}, {"+-*", 2, 4, 20}, {"+-*/", 1, 3, 50}, {"+-*/", 5, 6, 12}, {"*/", 2, 3, 30}}) {
    SCOPED_TRACE(std::string(ops) + " ops " + std::to_string(lo) + ".." + std::to_string(hi));
    ArithmeticTask t({.seed = 3, .min_ops = lo, .max_ops = hi, .max_operand = maxop, .ops = ops});
    check_gold(t, Split::train, 300);
    check_gold(t, Split::eval, 100);
    for (int i = 0; i < 200; ++i) {
      Problem p = t.problem(Split::train, i);
      ASSERT_GE(p.difficulty, lo);
      ASSERT_LE(p.difficulty, hi);
      std::string expr = p.prompt.substr(0, p.prompt.size() - 1);
      ASSERT_EQ(p.prompt.back(), '=');
      ASSERT_EQ(std::to_string(eval_flat(expr)), p.answer) << p.prompt;
      ASSERT_EQ(std::count_if(expr.begin(), expr.end(), [](char ch) { return !isdigit(static_cast<unsigned char>(ch)); }),
                p.difficulty);
      ASSERT_EQ(lines_of(p.gold_solution).size(), static_cast<size_t>(p.difficulty) + 1);  // one line per op
      for (char ch : expr) ASSERT_TRUE(isdigit(static_cast<unsigned char>(ch)) || std::string(ops).find(ch) != std::string::npos);
    }
  }
}

TEST(Arithmetic, CheckLinesRepeatEarlierStepsAfterTheLastAndLeaveProblemsUnchanged) {
  ArithmeticTask plain({.seed = 4, .min_ops = 1, .max_ops = 3, .max_operand = 20, .ops = "+-"});
  ArithmeticTask checks({.seed = 4, .min_ops = 1, .max_ops = 3, .max_operand = 20, .ops = "+-", .check_lines = 3});
  std::vector<int> seen(4, 0);
  for (int i = 0; i < 300; ++i) {
    Problem a = plain.problem(Split::train, i), b = checks.problem(Split::train, i);
    ASSERT_EQ(a.prompt, b.prompt);
    ASSERT_EQ(a.answer, b.answer);
    std::vector<std::string> la = lines_of(a.gold_solution), lb = lines_of(b.gold_solution);
    const size_t steps = la.size() - 1;  // the last line is "#### n"
    ASSERT_GE(lb.size(), la.size());
    const size_t k = lb.size() - la.size();
    ASSERT_LE(k, 3u);
    ++seen[k];
    for (size_t j = 0; j < steps; ++j) ASSERT_EQ(la[j], lb[j]);
    for (size_t j = steps; j < steps + k; ++j) {
      ASSERT_EQ(lb[j].rfind("check ", 0), 0u) << lb[j];
      ASSERT_NE(std::find(la.begin(), la.begin() + static_cast<long>(steps), lb[j].substr(6)), la.begin() + static_cast<long>(steps));
    }
    ASSERT_EQ(lb.back(), la.back());
    ASSERT_TRUE(checks.verify(b, b.gold_solution).correct);
    // The answer detector sees the answer at the last step line, before the checks.
    std::string upto;
    for (size_t j = 0; j < steps; ++j) upto += lb[j] + "\n";
    auto cand = checks.answer_candidate(b, upto);
    ASSERT_TRUE(cand.has_value());
    ASSERT_TRUE(checks.accepts(b, *cand));
  }
  for (int k = 0; k <= 3; ++k) EXPECT_GT(seen[k], 30) << k << " check lines";
}

TEST(Arithmetic, GoldFollowsPrecedence) {
  ArithmeticTask t({.seed = 9, .min_ops = 3, .max_ops = 3, .max_operand = 9, .ops = "+*"});
  int checked = 0;
  for (int i = 0; i < 500 && checked < 20; ++i) {
    Problem p = t.problem(Split::train, i);
    // In "a+b*c+d" the first line must be the product.
    std::string expr = p.prompt.substr(0, p.prompt.size() - 1);
    size_t star = expr.find('*');
    if (star == std::string::npos || expr.find('+') > star) continue;
    std::string first = lines_of(p.gold_solution)[0];
    EXPECT_NE(first.find('*'), std::string::npos) << p.prompt << "\n" << p.gold_solution;
    ++checked;
  }
  EXPECT_EQ(checked, 20);
}

TEST(Arithmetic, PerturbedAnswersScoreZero) {
  ArithmeticTask t({.seed = 5, .min_ops = 1, .max_ops = 4});
  for (int i = 0; i < 200; ++i) {
    Problem p = t.problem(Split::train, i);
    int64_t a = std::stoll(p.answer);
    for (const std::string& wrong : {std::to_string(a + 1), std::to_string(a - 1), std::to_string(-a - 1), p.answer + "1",
                                     std::string("x")}) {
      Verdict v = t.verify(p, with_answer(p.gold_solution, wrong));
      ASSERT_EQ(v.reward, 0.0) << p.prompt << " " << wrong;
      ASSERT_FALSE(v.correct);
    }
    EXPECT_EQ(t.verify(p, "7*3=21").reward, 0.0);  // no final line
    EXPECT_FALSE(t.verify(p, "7*3=21").extracted.has_value());
    EXPECT_EQ(t.verify(p, "#### +" + p.answer + " ").reward, a >= 0 ? 1.0 : 0.0);  // sign and spaces tolerated
  }
}

TEST(Arithmetic, IntermediateStatesAreStepValues) {
  ArithmeticTask t({.seed = 2, .min_ops = 3, .max_ops = 3});
  for (int i = 0; i < 50; ++i) {
    Problem p = t.problem(Split::train, i);
    auto st = t.intermediate_states(p, p.gold_solution);
    ASSERT_EQ(st.size(), 3u);
    EXPECT_EQ(st.back(), p.answer);
    auto ls = lines_of(p.gold_solution);
    for (size_t k = 0; k < st.size(); ++k) EXPECT_EQ(ls[k].substr(ls[k].rfind('=') + 1), st[k]);
  }
  Problem p;
  EXPECT_EQ(t.intermediate_states(p, "7*3=21\nthen\n12+21=33\n#### 33\n1+1=2"),
            (std::vector<std::string>{"21", "33"}));
  EXPECT_EQ(t.intermediate_states(p, "5-9=-4\n-4+1=-3\n####"), (std::vector<std::string>{"-4", "-3"}));
}

// ---- Countdown -----------------------------------------------------------------------------------------------

TEST(Countdown, EvalRules) {
  std::vector<int64_t> nums = {3, 7, 25, 5};
  EXPECT_EQ(countdown_eval("(25-5)*3+7", nums), 67);
  EXPECT_EQ(countdown_eval(" ( 25 - 5 ) * 3 + 7 ", nums), 67);
  EXPECT_EQ(countdown_eval("25/5+3", nums), 8);
  EXPECT_EQ(countdown_eval("25/3", nums), std::nullopt);       // inexact division
  EXPECT_EQ(countdown_eval("25+25", nums), std::nullopt);      // 25 given once
  EXPECT_EQ(countdown_eval("25+4", nums), std::nullopt);       // 4 not given
  EXPECT_EQ(countdown_eval("2*5", nums), std::nullopt);        // 2 not given
  EXPECT_EQ(countdown_eval("(25-5", nums), std::nullopt);      // unbalanced
  EXPECT_EQ(countdown_eval("25-5)", nums), std::nullopt);
  EXPECT_EQ(countdown_eval("-5+25", nums), std::nullopt);      // no unary minus
  EXPECT_EQ(countdown_eval("", nums), std::nullopt);
  EXPECT_EQ(countdown_eval("3-7", nums), -4);                  // negative values are values
  EXPECT_EQ(countdown_eval("25*3", nums, "+-"), std::nullopt);  // op not allowed
  EXPECT_EQ(countdown_eval("5+5", {5, 5}), 10);                // duplicates as often as given
  EXPECT_EQ(countdown_eval(std::string(100, '(') + "5" + std::string(100, ')'), {5}), std::nullopt);  // depth cap
  auto q = countdown_parse_prompt("3 7 25 5 -> 83:");
  ASSERT_TRUE(q.has_value());
  EXPECT_EQ(q->first, nums);
  EXPECT_EQ(q->second, 83);
}

TEST(Countdown, GoldVerifiesAndProblemsAreWellFormed) {
  for (auto [n, maxn, maxt, lo, hi, ops] : std::vector<std::tuple<int, int, int, int, int, const char*>>{
           {3, 10, 50, 1, 2, "+-*/"}, {4, 25, 100, 1, 3, "+-*/"}, {4, 25, 100, 3, 3, "+-*/"}, {5, 50, 500, 2, 4, "+*"},
           {6, 100, 999, 4, 5, "+-*/"}}) {
    SCOPED_TRACE("numbers " + std::to_string(n) + " steps " + std::to_string(lo) + ".." + std::to_string(hi));
    CountdownTask t({.seed = 4, .numbers = n, .max_number = maxn, .max_target = maxt, .min_steps = lo, .max_steps = hi,
                     .ops = ops});
    check_gold(t, Split::train, 200);
    check_gold(t, Split::eval, 60);
    for (int i = 0; i < 200; ++i) {
      Problem p = t.problem(Split::train, i);
      auto q = countdown_parse_prompt(p.prompt);
      ASSERT_TRUE(q.has_value()) << p.prompt;
      ASSERT_EQ(q->first.size(), static_cast<size_t>(n));
      for (int64_t x : q->first) ASSERT_TRUE(x >= 1 && x <= maxn) << p.prompt;
      ASSERT_TRUE(q->second >= 1 && q->second <= maxt) << p.prompt;
      ASSERT_EQ(std::count(q->first.begin(), q->first.end(), q->second), 0) << p.prompt;  // not trivially given
      ASSERT_TRUE(p.difficulty >= lo && p.difficulty <= hi);
      ASSERT_EQ(lines_of(p.gold_solution).size(), static_cast<size_t>(p.difficulty) + 1);
      ASSERT_EQ(countdown_eval(p.answer, q->first, ops), q->second) << p.answer;
      // The steps form one chain: every result but the last is an operand of a later step; the last is the target.
      auto ls = lines_of(p.gold_solution);
      ls.pop_back();
      for (size_t k = 0; k < ls.size(); ++k) {
        std::string result = ls[k].substr(ls[k].find('=') + 1);
        if (k + 1 == ls.size()) {
          ASSERT_EQ(result, std::to_string(q->second)) << p.gold_solution;
          continue;
        }
        bool used = false;
        for (size_t m = k + 1; m < ls.size(); ++m) {
          std::string lhs = ls[m].substr(0, ls[m].find('='));
          size_t op = lhs.find_first_of("+-*/");
          used |= lhs.substr(0, op) == result || lhs.substr(op + 1) == result;
        }
        ASSERT_TRUE(used) << "step " << k << " is a dead end:\n" << p.gold_solution;
      }
      // The answer uses exactly steps + 1 of the numbers.
      int literals = 0;
      for (size_t k = 0; k < p.answer.size(); ++k)
        literals += isdigit(static_cast<unsigned char>(p.answer[k])) &&
                    (k == 0 || !isdigit(static_cast<unsigned char>(p.answer[k - 1])));
      ASSERT_EQ(literals, p.difficulty + 1) << p.answer;
      // The "<expr>=<target>" form is accepted too.
      ASSERT_EQ(t.verify(p, "#### " + p.answer + " = " + std::to_string(q->second)).reward, 1.0);
    }
  }
}

TEST(Countdown, PerturbedAnswersScoreZero) {
  CountdownTask t({.seed = 6});
  for (int i = 0; i < 200; ++i) {
    Problem p = t.problem(Split::train, i);
    auto q = countdown_parse_prompt(p.prompt).value();
    std::string target = std::to_string(q.second);
    for (const std::string& wrong :
         {"(" + p.answer + ")*2", "(" + p.answer + ")+" + std::to_string(q.first[0]) + "*0", target,
          p.answer + "=" + std::to_string(q.second + 1), "(" + p.answer + ")+1001-1001", std::string("")}) {
      Verdict v = t.verify(p, with_answer(p.gold_solution, wrong));
      ASSERT_EQ(v.reward, 0.0) << p.prompt << " -> " << wrong;
    }
  }
  // A different correct expression also scores 1.
  Problem p;
  p.prompt = "3 7 25 5 -> 83:";
  EXPECT_EQ(t.verify(p, "#### 25*3+5+3").reward, 0.0);  // 3 used twice, only one 3
  EXPECT_EQ(t.verify(p, "#### 25*3+7").reward, 0.0);    // 82
  p.prompt = "3 7 25 5 -> 82:";
  EXPECT_EQ(t.verify(p, "#### 25*3+7").reward, 1.0);
  EXPECT_EQ(t.verify(p, "#### 7+3*25").reward, 1.0);
}

TEST(Countdown, IntermediateStatesAreRemainingNumbers) {
  CountdownTask t({.seed = 1});
  Problem p;
  p.prompt = "3 7 25 5 -> 83:";
  auto st = t.intermediate_states(p, "25-5=20\n20*4=80\n#### x");  // 4 is not available: stop there
  EXPECT_EQ(st, (std::vector<std::string>{"3 7 20"}));
  st = t.intermediate_states(p, "25-5=20\nhmm\n20*3=60\n60+7=67\n#### 67");
  EXPECT_EQ(st, (std::vector<std::string>{"3 7 20", "7 60", "67"}));
  for (int i = 0; i < 50; ++i) {
    Problem g = t.problem(Split::train, i);
    auto s = t.intermediate_states(g, g.gold_solution);
    ASSERT_EQ(s.size(), static_cast<size_t>(g.difficulty));
    auto q = countdown_parse_prompt(g.prompt).value();
    // After the last step the target is among the remaining numbers, which are numbers - steps in count.
    std::string last = " " + s.back() + " ";
    EXPECT_NE(last.find(" " + std::to_string(q.second) + " "), std::string::npos) << s.back();
    EXPECT_EQ(std::count(s.back().begin(), s.back().end(), ' ') + 1, 4 - g.difficulty);
  }
}

// ---- String ops ----------------------------------------------------------------------------------------------

TEST(StringOps, AtomicOps) {
  const std::string ab = "abcdefghijklmnopqrstuvwxyz";
  EXPECT_EQ(string_op_apply("rev", "abcde", ab), "edcba");
  EXPECT_EQ(string_op_apply("rotl", "abcde", ab), "bcdea");
  EXPECT_EQ(string_op_apply("rotr", "abcde", ab), "eabcd");
  EXPECT_EQ(string_op_apply("swap", "abcde", ab), "badce");
  EXPECT_EQ(string_op_apply("swap", "abcd", ab), "badc");
  EXPECT_EQ(string_op_apply("shift", "abyz", ab), "bcza");
  EXPECT_EQ(string_op_apply("drop", "abcde", ab), "bcde");
  EXPECT_EQ(string_op_apply("dup", "abcde", ab), "abcdee");
  EXPECT_THROW(string_op_apply("sort", "abc", ab), Error);
}

TEST(StringOps, GoldVerifiesAndStepsReplay) {
  for (auto [dlo, dhi, llo, lhi] :
       std::vector<std::tuple<int, int, int, int>>{{1, 1, 3, 5}, {1, 3, 3, 6}, {4, 6, 4, 8}, {8, 8, 2, 4}}) {
    SCOPED_TRACE("depth " + std::to_string(dlo) + ".." + std::to_string(dhi));
    StringOpsTask t({.seed = 8, .min_depth = dlo, .max_depth = dhi, .min_len = llo, .max_len = lhi});
    check_gold(t, Split::train, 300);
    check_gold(t, Split::eval, 100);
    for (int i = 0; i < 200; ++i) {
      Problem p = t.problem(Split::train, i);
      // Replay the prompt's pipeline independently and compare every intermediate string.
      std::string body = p.prompt.substr(0, p.prompt.size() - 1);
      std::vector<std::string> parts;
      for (size_t b = 0, e; b <= body.size(); b = e + 1) {
        e = body.find('|', b);
        if (e == std::string::npos) e = body.size();
        parts.push_back(body.substr(b, e - b));
      }
      ASSERT_EQ(parts.size(), static_cast<size_t>(p.difficulty) + 1);
      ASSERT_TRUE(parts[0].size() >= static_cast<size_t>(llo) && parts[0].size() <= static_cast<size_t>(lhi));
      std::string cur = parts[0];
      std::vector<std::string> want;
      for (size_t k = 1; k < parts.size(); ++k) {
        std::string next = string_op_apply(parts[k], cur, t.config().alphabet);
        ASSERT_NE(next, cur) << "a step left the string unchanged: " << p.prompt;
        const std::string& before_cur = want.size() >= 2 ? want[want.size() - 2] : parts[0];
        ASSERT_TRUE(want.empty() || next != before_cur) << "a step undid the one before: " << p.prompt;
        cur = next;
        want.push_back(cur);
      }
      ASSERT_EQ(cur, p.answer);
      ASSERT_EQ(t.intermediate_states(p, p.gold_solution), want);
    }
  }
}

TEST(StringOps, EvalDepthIsSelectable) {
  auto t = make_task("string_ops", {{"seed", "2"}, {"min_depth", "1"}, {"max_depth", "2"}, {"eval_min_depth", "4"},
                                    {"eval_max_depth", "5"}, {"ops", "rev, rotl,swap,shift"}, {"alphabet", "abcdef"}});
  std::set<int> train_d, eval_d;
  for (int i = 0; i < 300; ++i) {
    train_d.insert(t->problem(Split::train, i).difficulty);
    Problem e = t->problem(Split::eval, i);
    eval_d.insert(e.difficulty);
    ASSERT_EQ(t->verify(e, e.gold_solution).reward, 1.0);
    for (char c : e.prompt.substr(0, e.prompt.find('|'))) ASSERT_NE(std::string("abcdef").find(c), std::string::npos);
    ASSERT_EQ(e.prompt.find("rotr"), std::string::npos);
  }
  EXPECT_EQ(train_d, (std::set<int>{1, 2}));
  EXPECT_EQ(eval_d, (std::set<int>{4, 5}));
}

TEST(StringOps, PerturbedAnswersScoreZero) {
  StringOpsTask t({.seed = 11, .min_depth = 1, .max_depth = 4});
  for (int i = 0; i < 200; ++i) {
    Problem p = t.problem(Split::train, i);
    std::string a = p.answer;
    std::string flipped = a;
    flipped[0] = flipped[0] == 'a' ? 'b' : 'a';
    for (const std::string& wrong : {flipped, a + a.back(), a.substr(1), std::string("")}) {
      ASSERT_EQ(t.verify(p, with_answer(p.gold_solution, wrong)).reward, 0.0) << p.prompt << " " << wrong;
    }
    // The intermediate string before the last step is a wrong final answer too (each step changes the string).
    auto st = t.intermediate_states(p, p.gold_solution);
    if (st.size() >= 2) {
      ASSERT_EQ(t.verify(p, with_answer(p.gold_solution, st[st.size() - 2])).reward, 0.0);
    }
  }
}

// ---- constraints ----------------------------------------------------------------------------------------------

namespace {
// Every assignment of the prompt's variables in [0, m] that satisfies its constraints, by brute force
// written apart from the task's own (parses the prompt text).
std::vector<std::string> solutions(const std::string& prompt, int m) {
  std::vector<std::string> cs;
  std::string cur;
  for (char ch : prompt.substr(0, prompt.size() - 1)) {
    if (ch == ',') cs.push_back(cur), cur.clear();
    else cur += ch;
  }
  cs.push_back(cur);
  int n = 0;
  for (char ch : prompt)
    if (ch >= 'a' && ch <= 'z') n = std::max(n, ch - 'a' + 1);
  std::vector<std::string> out;
  std::vector<int> v(static_cast<size_t>(n), 0);
  for (long code = 0;; ++code) {
    long c = code;
    for (int i = 0; i < n; ++i) v[static_cast<size_t>(i)] = static_cast<int>(c % (m + 1)), c /= (m + 1);
    if (c) break;
    bool ok = true;
    for (const std::string& t : cs) {
      int x = v[static_cast<size_t>(t[0] - 'a')];
      if (t.find("!=") != std::string::npos) ok = ok && x != v[static_cast<size_t>(t[3] - 'a')];
      else if (t[1] == '<') ok = ok && x < v[static_cast<size_t>(t[2] - 'a')];
      else {
        int y = v[static_cast<size_t>(t[2] - 'a')], k = std::stoi(t.substr(4));
        ok = ok && (t[1] == '+' ? x + y == k : x - y == k);
      }
    }
    if (ok) {
      std::string a;
      for (int i = 0; i < n; ++i) a += (i ? "," : "") + std::to_string(v[static_cast<size_t>(i)]);
      out.push_back(a);
    }
  }
  return out;
}
}  // namespace

TEST(Constraints, EveryProblemHasExactlyTheOneSolutionItsGoldStates) {
  auto t = make_task("constraints", {{"seed", "3"}, {"min_vars", "2"}, {"max_vars", "4"}});
  std::map<int, int> by_vars;
  for (int i = 0; i < 150; ++i)
    for (Split s : {Split::train, Split::eval}) {
      Problem p = t->problem(s, i);
      SCOPED_TRACE(p.prompt);
      ASSERT_EQ(solutions(p.prompt, 9), std::vector<std::string>{p.answer});
      EXPECT_EQ(t->verify(p, p.gold_solution).reward, 1.0);
      EXPECT_EQ(t->verify(p, "#### " + p.answer).reward, 1.0);
      std::string spaced = p.answer;
      for (size_t at = spaced.find(','); at != std::string::npos; at = spaced.find(',', at + 2)) spaced.insert(at + 1, " ");
      EXPECT_EQ(t->verify(p, "#### " + spaced).reward, 1.0);  // spaces are ignored
      std::string wrong = p.answer;
      wrong[0] = wrong[0] == '9' ? '8' : static_cast<char>(wrong[0] + 1);
      EXPECT_EQ(t->verify(p, "#### " + wrong).reward, 0.0);
      EXPECT_EQ(p.difficulty, static_cast<int>(std::count(p.answer.begin(), p.answer.end(), ',')) + 1);
      by_vars[p.difficulty] += 1;
    }
  EXPECT_EQ(by_vars.size(), 3u);  // 2, 3 and 4 variables all occur
  EXPECT_EQ(t->problem(Split::train, 0).gold_solution.rfind("a=", 0), 0u);
  auto four = make_task("constraints", {{"eval_min_vars", "4"}, {"eval_max_vars", "4"}});
  EXPECT_EQ(four->problem(Split::eval, 5).difficulty, 4);
  EXPECT_LE(four->problem(Split::train, 5).difficulty, 3);
}

TEST(Mixture, MembersByWeightWithTheirOwnParametersAndVerification) {
  auto t = make_task("mixture", {{"tasks", "arithmetic, constraints"}, {"weights", "3,1"}, {"seed", "2"},
                                 {"arithmetic.max_ops", "1"}, {"arithmetic.seed", "5"}, {"constraints.max_vars", "2"}});
  auto arith = make_task("arithmetic", {{"max_ops", "1"}, {"seed", "5"}});
  std::map<std::string, int> n;
  for (int i = 0; i < 2000; ++i) {
    Problem p = t->problem(Split::train, i);
    std::string member = p.id.substr(0, p.id.find(':'));
    n[member] += 1;
    EXPECT_EQ(t->verify(p, p.gold_solution).reward, 1.0) << p.id;
    EXPECT_EQ(t->verify(p, "#### 12345").reward, 0.0) << p.id;
    if (member == "arithmetic") {
      EXPECT_EQ(p.difficulty, 1);  // the member's own parameters
      EXPECT_EQ(p.prompt, arith->problem(Split::train, i).prompt);  // at the member's own index
    } else {
      EXPECT_EQ(p.difficulty, 2);
    }
    Problem derived = p;  // a method's prompt (REVES, ZPPO) keeps the id and is checked by the member
    derived.id += "#rev";
    derived.prompt = "something else";
    EXPECT_EQ(t->verify(derived, p.gold_solution).reward, 1.0);
  }
  EXPECT_EQ(n.size(), 2u);
  EXPECT_NEAR(n["arithmetic"] / 2000.0, 0.75, 0.03);
  EXPECT_EQ(t->problem(Split::eval, 7).prompt, make_task("mixture", {{"tasks", "arithmetic,constraints"}, {"weights", "3,1"}, {"seed", "2"},
                                                                    {"arithmetic.max_ops", "1"}, {"arithmetic.seed", "5"},
                                                                    {"constraints.max_vars", "2"}})->problem(Split::eval, 7).prompt);
  Problem stray;
  stray.id = "countdown:countdown/train/1";
  EXPECT_THROW(t->verify(stray, "#### 1"), Error);
  EXPECT_EQ(t->size(Split::train), -1);
}

// ---- Shared rules: determinism, split disjointness, registry errors -------------------------------------------

TEST(Tasks, DeterministicInSeedSplitIndex) {
  for (const char* name : {"arithmetic", "countdown", "string_ops", "constraints"}) {
    SCOPED_TRACE(name);
    auto a = make_task(name, {{"seed", "7"}}), b = make_task(name, {{"seed", "7"}}), c = make_task(name, {{"seed", "8"}});
    int differ = 0;
    for (int i = 0; i < 200; ++i) {
      for (Split s : {Split::train, Split::eval}) {
        Problem pa = a->problem(s, i), pb = b->problem(s, i);
        ASSERT_EQ(pa.prompt, pb.prompt);
        ASSERT_EQ(pa.gold_solution, pb.gold_solution);
        ASSERT_EQ(pa.answer, pb.answer);
      }
      differ += a->problem(Split::train, i).prompt != c->problem(Split::train, i).prompt;
    }
    // Out-of-order access gives the same problem (no hidden cursor).
    EXPECT_EQ(a->problem(Split::train, 150).prompt, b->problem(Split::train, 150).prompt);
    EXPECT_GE(differ, 180) << "seed 8 should give different problems";
    // Index i of train and of eval are different problems.
    EXPECT_NE(a->problem(Split::train, 3).prompt, a->problem(Split::eval, 3).prompt);
  }
}

TEST(Tasks, TrainAndEvalAreDisjoint) {
  for (const char* name : {"arithmetic", "countdown", "string_ops", "constraints"}) {
    SCOPED_TRACE(name);
    // A small problem space, so that disjointness is tested under many repeats.
    TaskParams small = std::string(name) == "arithmetic"   ? TaskParams{{"max_ops", "2"}, {"max_operand", "12"}}
                       : std::string(name) == "countdown" ? TaskParams{{"numbers", "3"}, {"max_number", "12"}}
                       : std::string(name) == "constraints" ? TaskParams{{"max_vars", "2"}, {"max_value", "9"}}
                                                          : TaskParams{{"max_depth", "2"}, {"max_len", "4"}};
    auto t = make_task(name, small);
    std::set<std::string> train, eval;
    for (int i = 0; i < 2000; ++i) {
      std::string tr = t->problem(Split::train, i).prompt, ev = t->problem(Split::eval, i).prompt;
      if (std::string(name) == "countdown") tr = countdown_key(tr), ev = countdown_key(ev);
      train.insert(tr);
      eval.insert(ev);
    }
    std::vector<std::string> both;
    std::set_intersection(train.begin(), train.end(), eval.begin(), eval.end(), std::back_inserter(both));
    EXPECT_TRUE(both.empty()) << both.size() << " shared, e.g. " << both[0];
    EXPECT_GT(train.size(), 200u);
    EXPECT_GT(eval.size(), 50u);
  }
}

TEST(Tasks, SplitRuleAndRandInt) {
  int eval = 0;
  for (int i = 0; i < 100000; ++i) eval += split_of("p" + std::to_string(i)) == Split::eval;
  EXPECT_NEAR(eval / 100000.0, 0.1, 0.005);
  EXPECT_EQ(stable_hash("abc"), stable_hash("abc"));
  EXPECT_EQ(stable_hash("abc"), 0x29e32c04ec3f9c30ull);  // the value it has always had: the splits depend on it
  EXPECT_NE(stable_hash("abc"), stable_hash("abd"));
  Rng r(1, 2);
  std::vector<int> hist(7, 0);
  for (int i = 0; i < 70000; ++i) {
    int64_t v = rand_int(r, -3, 3);
    ASSERT_TRUE(v >= -3 && v <= 3);
    ++hist[v + 3];
  }
  for (int h : hist) EXPECT_NEAR(h, 10000, 400);
  EXPECT_EQ(rand_int(r, 5, 5), 5);
}

TEST(Tasks, RegistryAndParameterErrors) {
  EXPECT_EQ(task_names(),
            (std::vector<std::string>{"arithmetic", "code", "compose", "constraints", "countdown", "dataset",
                                      "episodes", "mixture", "rubric_proxy", "string_ops", "user_sim"}));
  // "episodes": indices for an environment that draws its own problems; it takes no parameters.
  EXPECT_EQ(make_task("episodes", {})->problem(Split::train, 7).id, "episodes/train/7");
  EXPECT_EQ(make_task("episodes", {})->problem(Split::train, 7).index, 7);
  expect_error([] { make_task("episodes", {{"digits", "4"}}); }, {"'episodes'", "digits"});
  expect_error([] { make_task("mixture", {}); }, {"'mixture'", "parameter 'tasks'", "comma list"});
  expect_error([] { make_task("mixture", {{"tasks", "arithmetic,mixture"}}); }, {"'tasks'", "other than mixture"});
  expect_error([] { make_task("mixture", {{"tasks", "arithmetic"}, {"weights", "1,2"}}); }, {"'weights'", "1 positive numbers"});
  expect_error([] { make_task("mixture", {{"tasks", "arithmetic"}, {"countdown.numbers", "3"}}); },
               {"'countdown.numbers'", "a parameter of a listed task"});
  expect_error([] { make_task("mixture", {{"tasks", "arithmetic"}, {"arithmetic.max_opz", "3"}}); },
               {"'arithmetic'", "unknown parameter 'max_opz'"});
  expect_error([] { make_task("constraints", {{"kinds", "<!"}}); }, {"kinds", "+ or -", "got '<!'"});
  expect_error([] { make_task("constraints", {{"max_vars", "9"}}); }, {"'max_vars'", "got '9'"});
  expect_error([] { make_task("sudoku", {}); }, {"unknown task 'sudoku'", "arithmetic", "countdown"});
  expect_error([] { make_task("arithmetic", {{"max_opz", "3"}}); }, {"'arithmetic'", "unknown parameter 'max_opz'", "max_ops"});
  expect_error([] { make_task("arithmetic", {{"max_ops", "three"}}); },
               {"parameter 'max_ops'", "expected an integer in [1, 12]", "got 'three'"});
  expect_error([] { make_task("arithmetic", {{"max_ops", "40"}}); }, {"'max_ops'", "got '40'"});
  expect_error([] { make_task("arithmetic", {{"min_ops", "4"}, {"max_ops", "2"}}); }, {"min_ops=4", "max_ops=2"});
  expect_error([] { make_task("arithmetic", {{"ops", "+^"}}); }, {"ops", "+ - * /", "'+^'"});
  expect_error([] { make_task("arithmetic", {{"seed", "-1"}}); }, {"'seed'", "non-negative integer", "got '-1'"});
  expect_error([] { make_task("countdown", {{"numbers", "3"}, {"max_steps", "3"}}); }, {"max_steps=3", "numbers - 1 = 2"});
  expect_error([] { make_task("string_ops", {{"ops", "rev,sort"}}); }, {"ops", "rev,rotl", "got 'sort'"});
  expect_error([] { make_task("string_ops", {{"alphabet", "ab|"}}); }, {"alphabet", "'|'", "got 'ab|'"});
  expect_error([] { make_task("string_ops", {{"eval_min_depth", "5"}, {"eval_max_depth", "3"}}); }, {"depth (eval)", "5"});
  EXPECT_NO_THROW(make_task("string_ops", {{"min_depth", "5"}}));  // max_depth follows min_depth when not given
}

TEST(Tasks, TinySpaceStaysInItsSplitOrFailsWithAMessage) {
  // 1 op over {0, 1, 2} with "+" or "*" gives 18 problems; eval holds exactly those whose hash says so.
  for (const char* ops : {"+", "*", "+*"}) {
    auto t = make_task("arithmetic", {{"max_ops", "1"}, {"max_operand", "2"}, {"ops", ops}});
    std::set<std::string> all_eval;
    for (char op : std::string(ops))
      for (int a = 0; a <= 2; ++a)
        for (int b = 0; b <= 2; ++b) {
          std::string e = std::to_string(a) + op + std::to_string(b);
          if (split_of(e) == Split::eval) all_eval.insert(e + "=");
        }
    if (all_eval.empty()) {
      expect_error([&] { t->problem(Split::eval, 0); }, {"no eval problem", "too small"});
      continue;
    }
    for (int i = 0; i < 30; ++i) ASSERT_EQ(all_eval.count(t->problem(Split::eval, i).prompt), 1u);
    for (int i = 0; i < 30; ++i) ASSERT_EQ(all_eval.count(t->problem(Split::train, i).prompt), 0u);
  }
}

// ---- Safe verification ---------------------------------------------------------------------------------------

namespace {
class ThrowingTask : public Task {
 public:
  std::string name() const override { return "throwing"; }
  int64_t size(Split) const override { return 1; }
  Problem problem(Split, uint64_t) const override {
    Problem p;
    p.id = "throwing/train/0";
    p.answer = "1";
    return p;
  }
  Verdict verify(const Problem& p, const std::string& c) const override {
    if (c == "boom") throw std::runtime_error("verifier crashed");
    Verdict v;
    v.reward = 1;
    v.correct = true;
    v.extracted = c;
    return v;
  }
};
}  // namespace

TEST(Tasks, VerifySafelyScoresZeroOnThrow) {
  log_set_sink([](LogLevel, std::string_view) {});
  auto task = std::make_shared<ThrowingTask>();
  reward::SafeReward safe({.name = "throwing", .timeout_s = 5});
  Problem p = task->problem(Split::train, 0);
  Verdict ok = verify_safely(safe, task, p, "1");
  EXPECT_EQ(ok.reward, 1.0);
  EXPECT_EQ(ok.extracted, "1");
  Verdict bad = verify_safely(safe, task, p, "boom");
  EXPECT_EQ(bad.reward, 0.0);
  EXPECT_FALSE(bad.correct);
  EXPECT_EQ(safe.exceptions(), 1);
  EXPECT_EQ(safe.calls(), 2);
  log_set_sink(nullptr);
}
