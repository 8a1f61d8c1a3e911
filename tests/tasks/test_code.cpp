// The "code" task: deterministic problems, disjoint splits, every gold solution passes its hidden tests in the
// sandbox, extraction of the fenced code, rewards (fraction and all), parameters.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "temper/core/error.h"
#include "temper/sandbox/python_tests.h"
#include "temper/tasks/code.h"
#include "temper/tasks/task.h"

using namespace temper::tasks;

namespace {
std::unique_ptr<Task> code_task(TaskParams p = {}) {
  return make_task("code", p);
}
}  // namespace

TEST(CodeTask, DeterministicInSeedAndDifferentAcrossSeeds) {
  auto a = code_task({{"seed", "3"}, {"max_level", "3"}}), b = code_task({{"seed", "3"}, {"max_level", "3"}}),
       c = code_task({{"seed", "4"}, {"max_level", "3"}});
  int differ = 0;
  for (uint64_t i = 0; i < 50; ++i) {
    Problem x = a->problem(Split::train, i), y = b->problem(Split::train, i), z = c->problem(Split::train, i);
    EXPECT_EQ(x.prompt, y.prompt);
    EXPECT_EQ(x.answer, y.answer);
    EXPECT_EQ(x.gold_solution, y.gold_solution);
    differ += x.answer != z.answer;
  }
  EXPECT_GT(differ, 40);
}

TEST(CodeTask, TrainAndEvalAreDisjoint) {
  auto t = code_task({{"max_level", "3"}});
  std::set<std::string> train;
  for (uint64_t i = 0; i < 2000; ++i) train.insert(t->problem(Split::train, i).answer);
  for (uint64_t i = 0; i < 300; ++i) EXPECT_EQ(train.count(t->problem(Split::eval, i).answer), 0u) << i;
}

// Python string literal of s (ASCII code and tests).
std::string py_literal(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\\' || c == '\'')
      out += '\\', out += c;
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out + "'";
}

TEST(CodeTask, EveryGoldSolutionPassesItsTests) {
  auto t = code_task({{"min_level", "1"}, {"max_level", "3"}, {"seed", "7"}});
  auto* code = dynamic_cast<CodeTask*>(t.get());
  ASSERT_NE(code, nullptr);
  std::set<int> levels;
  std::set<std::string> names;
  // 400 problems in one sandboxed interpreter (each test: the gold code and its tests in a namespace of their
  // own), then a few through verify itself.
  std::vector<std::string> batch;
  std::vector<Problem> problems;
  for (uint64_t i = 0; i < 400; ++i) {
    Problem p = t->problem(i % 4 == 3 ? Split::eval : Split::train, i);
    std::optional<std::string> gold = t->extract_answer(p.gold_solution);
    ASSERT_TRUE(gold) << p.gold_solution;
    batch.push_back("__ns = {}\nexec(" + py_literal(*gold) + ", __ns)\nexec(" + py_literal(p.answer) + ", __ns)");
    levels.insert(p.difficulty);
    names.insert(p.prompt.substr(6, p.prompt.find('(') - 6));
    problems.push_back(std::move(p));
  }
  temper::sandbox::SandboxLimits l;
  l.wall_s = 20;
  l.cpu_s = 20;
  temper::sandbox::TestOutcome o = temper::sandbox::run_python_tests("", batch, l);
  EXPECT_EQ(o.passed, 400) << o.error;
  EXPECT_EQ(levels, (std::set<int>{1, 2, 3}));
  EXPECT_EQ(names.size(), code_families().size());
  for (size_t i = 0; i < 12; ++i) {
    Verdict v = t->verify(problems[i], problems[i].gold_solution);
    EXPECT_TRUE(v.correct) << problems[i].prompt << problems[i].gold_solution << "\n" << problems[i].answer;
    EXPECT_DOUBLE_EQ(v.reward, 1.0);
  }
}

TEST(CodeTask, PromptShowsTheSignatureAndExamples) {
  auto t = code_task({{"families", "add_k"}, {"examples", "2"}, {"tests", "3"}});
  Problem p = t->problem(Split::train, 0);
  EXPECT_EQ(p.prompt.rfind("Write add_k(xs): add ", 0), 0u) << p.prompt;
  EXPECT_EQ(std::count(p.prompt.begin(), p.prompt.end(), '\n'), 3) << p.prompt;
  EXPECT_EQ(std::count(p.answer.begin(), p.answer.end(), '\n'), 4) << p.answer;  // 5 asserts
  EXPECT_EQ(p.gold_solution.rfind("```python\ndef add_k(xs):\n    return [x + ", 0), 0u) << p.gold_solution;
}

TEST(CodeTask, ExtractionAndRewards) {
  auto t = code_task({{"families", "reverse_string"}, {"examples", "1"}, {"tests", "3"}});
  Problem p = t->problem(Split::train, 1);
  EXPECT_EQ(*t->extract_answer("text\n```python\ndef f(s):\n    return s\n```\nmore"), "def f(s):\n    return s\n");
  EXPECT_EQ(*t->extract_answer("```\nx = 1"), "x = 1");  // an unclosed fence: to the end
  EXPECT_EQ(*t->extract_answer("def f(s): return s"), "def f(s): return s");
  EXPECT_FALSE(t->extract_answer("```python\n   \n```"));
  // The answer line the task forces (answer_close) followed by code is read as code.
  EXPECT_TRUE(t->verify(p, t->answer_close() + "def reverse_string(s):\n    return s[::-1]\n").correct);
  EXPECT_TRUE(t->verify(p, "def reverse_string(s):\n    return ''.join(reversed(s))").correct);
  Verdict wrong = t->verify(p, "```python\ndef reverse_string(s):\n    return s\n```");
  EXPECT_FALSE(wrong.correct);
  EXPECT_GE(wrong.reward, 0.0);
  EXPECT_LT(wrong.reward, 1.0);
  EXPECT_DOUBLE_EQ(t->verify(p, "```python\ndef reverse_string(s)\n    return s\n```").reward, 0.0);
  EXPECT_DOUBLE_EQ(t->verify(p, "no code here at all ```").reward, 0.0);
}

TEST(CodeTask, PartialCreditAndTheAllPassVariant) {
  // sum_list's tests: a solution right only on the empty list scores its share; "all" gives it 0.
  TaskParams params = {{"families", "sum_list"}, {"examples", "0"}, {"tests", "8"}};
  auto frac = code_task(params);
  params["reward"] = "all";
  auto all = code_task(params);
  const std::string almost = "def sum_list(xs):\n    return sum(xs) if len(xs) < 3 else 0\n";
  for (uint64_t i = 0; i < 20; ++i) {
    Problem p = frac->problem(Split::train, i);
    Verdict f = frac->verify(p, almost), a = all->verify(p, almost);
    EXPECT_EQ(a.reward, f.correct ? 1.0 : 0.0);
    if (f.reward > 0 && f.reward < 1) {
      EXPECT_EQ(a.reward, 0.0);
      return;
    }
  }
  FAIL() << "no problem gave partial credit";
}

TEST(CodeTask, HostileCodeScoresZero) {
  auto t = code_task({{"families", "add_k"}, {"wall_s", "1"}, {"cpu_s", "1"}});
  Problem p = t->problem(Split::train, 0);
  for (const char* code : {"while True: pass", "import os\nos.kill(-1, 9)", "x = 'a' * (10 ** 10)"})
    EXPECT_DOUBLE_EQ(t->verify(p, code).reward, 0.0) << code;
}

TEST(CodeTask, BadParametersAreNamed) {
  auto msg = [](TaskParams p) {
    try {
      make_task("code", p);
    } catch (const temper::Error& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  EXPECT_NE(msg({{"reward", "some"}}).find("parameter 'reward'"), std::string::npos);
  EXPECT_NE(msg({{"families", "nope"}}).find("families"), std::string::npos);
  EXPECT_NE(msg({{"max_level", "4"}}).find("max_level"), std::string::npos);
  EXPECT_NE(msg({{"colour", "red"}}).find("unknown parameter 'colour'"), std::string::npos);
}
