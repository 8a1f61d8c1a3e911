// Environments (env/): the calculator's evaluator and problems, the guessing game, option checks, and environment
// programs over JSON lines with Python workers written to a temp dir: round trips over 1 and 3 workers, episodes
// from 4 threads, a hang (killed at timeout_s), a crash, a malformed reply, an {"error"} reply, replies that break
// the rules, start failures, and examples/envs/guess_env.py against the built-in.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "temper/core/error.h"
#include "temper/env/calculator_env.h"
#include "temper/env/environment.h"
#include "temper/env/guessing_env.h"
#include "temper/env/program_environment.h"
#include "temper/reward/child_process.h"

namespace temper::env {
namespace {

namespace fs = std::filesystem;
using ojson = nlohmann::ordered_json;

ojson assistant(const std::string& content) {
  return ojson{{"role", "assistant"}, {"content", content}};
}

ojson calc_call(const std::string& id, const std::string& arguments_json) {
  return ojson{
      {"role", "assistant"},
      {"content", nullptr},
      {"tool_calls",
       ojson::array({ojson{
           {"id", id}, {"type", "function"}, {"function", {{"name", "calculator"}, {"arguments", arguments_json}}}}})}};
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

// ---- the calculator's evaluator ----

TEST(CalculatorEvaluate, ExactValues) {
  const std::vector<std::pair<std::string, int64_t>> ok = {
      {"1+2*3", 7},
      {"(1+2)*3", 9},
      {" 12 / 4 ", 3},
      {"-(4-10)", 6},
      {"--5", 5},
      {"2*-3", -6},
      {"100 - 7 - 3", 90},
      {"48/4/2", 6},
      {"1234567 + 7654321 + 1111111", 9999999},
      {"9876543 * 1234567", 12193254061881LL},
      {"9223372036854775807", std::numeric_limits<int64_t>::max()},
      {"-9223372036854775807 - 1", std::numeric_limits<int64_t>::min()},
      {"3037000499*3037000499", 9223372030926249001LL},
  };
  for (const auto& [expr, value] : ok) {
    const CalcResult r = calculator_evaluate(expr);
    EXPECT_TRUE(r.ok) << expr << ": " << r.error;
    EXPECT_EQ(r.value, value) << expr;
  }
}

TEST(CalculatorEvaluate, ErrorsAsText) {
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"1/0", "division by zero"},
      {"5/(3-3)", "division by zero"},
      {"7/2", "7 / 2 is not a whole number (the calculator divides whole numbers exactly)"},
      {"9223372036854775807+1", "overflow: the result does not fit in 64 bits (+-9.2e18)"},
      {"-9223372036854775807-2", "overflow: the result does not fit in 64 bits (+-9.2e18)"},
      {"3037000500*3037000500", "overflow: the result does not fit in 64 bits (+-9.2e18)"},
      {"(-9223372036854775807-1)/-1", "overflow: the result does not fit in 64 bits (+-9.2e18)"},
      {"-(-9223372036854775807-1)", "overflow: the result does not fit in 64 bits (+-9.2e18)"},
      {"9223372036854775808", "the number at character 1 is too large"},
      {"2 x 3", "unexpected 'x' at character 3"},
      {"2+", "the expression ends too early"},
      {"(1+2", "missing ')'"},
      {"(1+2))", "unexpected ')' at character 6"},
      {"", "empty expression"},
      {"   ", "empty expression"},
      {"1,000+1", "unexpected ',' at character 2"},
      {std::string(150, '(') + "1" + std::string(150, ')'), "too deeply nested (over 100 levels)"},
      {std::string(2001, '1'), "the expression is too long (over 2000 characters)"},
  };
  for (const auto& [expr, error] : bad) {
    const CalcResult r = calculator_evaluate(expr);
    EXPECT_FALSE(r.ok) << expr << " gave " << r.value;
    EXPECT_EQ(r.error, error) << expr.substr(0, 40);
  }
}

TEST(LastNumber, NormalisedAsDocumented) {
  EXPECT_EQ(last_number("The answer is 1,234,567."), "1234567");
  EXPECT_EQ(last_number("x = -42"), "-42");
  EXPECT_EQ(last_number("range 3-5"), "5");
  EXPECT_EQ(last_number("a-7"), "7");
  EXPECT_EQ(last_number("007.500 units"), "7.5");
  EXPECT_EQ(last_number("12.0"), "12");
  EXPECT_EQ(last_number("-0"), "0");
  EXPECT_EQ(last_number("1,2345"), "2345");
  EXPECT_EQ(last_number("1, 2 and 3"), "3");
  EXPECT_EQ(last_number("no digits here"), std::nullopt);
  EXPECT_EQ(last_number(""), std::nullopt);
}

// ---- the calculator's problems and episodes ----

TEST(CalculatorProblem, PinnedForSeedZero) {
  const CalculatorOptions o;
  const CalculatorProblem a = calculator_problem(o, 0, false, 0);
  const CalculatorProblem b = calculator_problem(o, 0, false, 1);
  const CalculatorProblem c = calculator_problem(o, 0, true, 0);
  EXPECT_EQ(a.kind, "product");
  EXPECT_EQ(a.question,
            "A shop stacked 4350041 boxes with 304655 pencils each. It also has 7468 and 134623 loose pencils in 2 "
            "other places. How many pencils are there in total?");
  EXPECT_EQ(a.answer, 4350041LL * 304655 + 7468 + 134623);
  EXPECT_EQ(a.answer, 1325261882946LL);
  EXPECT_EQ(b.kind, "product");
  EXPECT_EQ(b.question,
            "A shop stacked 6636 boxes with 1929 pencils each. It also has 73646 loose pencils. How many pencils are "
            "there in total?");
  EXPECT_EQ(b.answer, 6636 * 1929 + 73646);
  EXPECT_EQ(c.kind, "balance");
  EXPECT_EQ(c.question,
            "An account holds 204436 dollars. Then, in order: a withdrawal of 79291 dollars, a deposit of 2401 dollars "
            "and a deposit of 614767 dollars. How many dollars does it hold at the end?");
  EXPECT_EQ(c.answer, 204436 - 79291 + 2401 + 614767);
}

TEST(CalculatorProblem, DeterministicAndWithinTheOptions) {
  CalculatorOptions o;
  std::set<std::string> kinds, questions;
  for (uint64_t i = 0; i < 300; ++i) {
    const CalculatorProblem p = calculator_problem(o, 7, false, i);
    const CalculatorProblem again = calculator_problem(o, 7, false, i);
    EXPECT_EQ(p.question, again.question);
    EXPECT_EQ(p.answer, again.answer);
    EXPECT_GE(p.answer, 0) << p.question;
    kinds.insert(p.kind);
    questions.insert(p.question);
    // Every number in the question has 4-7 digits, and there are 3-5 of them (plus the count of deliveries etc.).
    int operands = 0;
    for (size_t k = 0; k < p.question.size();) {
      if (!std::isdigit(static_cast<unsigned char>(p.question[k]))) {
        ++k;
        continue;
      }
      size_t e = k;
      while (e < p.question.size() && std::isdigit(static_cast<unsigned char>(p.question[e]))) ++e;
      const size_t len = e - k;
      if (len >= 2) {
        EXPECT_GE(len, 4u) << p.question;
        EXPECT_LE(len, 7u) << p.question;
        ++operands;
      }
      k = e;
    }
    EXPECT_GE(operands, 3) << p.question;
    EXPECT_LE(operands, 5) << p.question;
  }
  EXPECT_EQ(kinds, (std::set<std::string>{"balance", "product", "sum"}));
  EXPECT_EQ(questions.size(), 300u);
  EXPECT_NE(calculator_problem(o, 7, false, 3).question, calculator_problem(o, 7, true, 3).question);
  EXPECT_NE(calculator_problem(o, 7, false, 3).question, calculator_problem(o, 8, false, 3).question);
}

TEST(CalculatorEnvironment, ToolCallsParseErrorsAndTheFinalAnswer) {
  EnvOptions opt;
  opt.kind = "calculator";
  opt.params = {{"malformed_penalty", 0.25}};
  std::unique_ptr<Environment> env = make_environment(opt);
  EXPECT_EQ(env->name(), "calculator");
  EnvReply r = env->reset("e1", ojson{{"question", "What is 1234567 + 7654321?"}, {"answer", "8888888"}});
  ASSERT_TRUE(r.ok) << r.error;
  ASSERT_EQ(r.messages.size(), 2u);
  EXPECT_EQ(r.messages[0]["role"], "system");
  EXPECT_EQ(r.messages[0]["content"], kCalculatorSystemPrompt);
  EXPECT_EQ(r.messages[1], (ojson{{"role", "user"}, {"content", "What is 1234567 + 7654321?"}}));
  ASSERT_TRUE(r.tools.is_array());
  ASSERT_EQ(r.tools.size(), 1u);
  EXPECT_EQ(r.tools[0]["function"]["name"], "calculator");
  EXPECT_EQ(r.tools[0]["function"]["parameters"]["required"], ojson::array({"expression"}));
  EXPECT_EQ(r.tools[0]["function"]["parameters"]["properties"]["expression"]["type"], "string");

  // Two calls in one turn: one good (arguments as JSON text), one dividing by zero (arguments as an object).
  ojson two = calc_call("call_1", R"({"expression": "1234567 + 7654321"})");
  two["tool_calls"].push_back(ojson{{"id", "call_2"},
                                    {"type", "function"},
                                    {"function", {{"name", "calculator"}, {"arguments", {{"expression", "1/0"}}}}}});
  r = env->step("e1", two);
  ASSERT_TRUE(r.ok);
  EXPECT_FALSE(r.done);
  EXPECT_EQ(r.reward, 0);
  ASSERT_EQ(r.messages.size(), 2u);
  EXPECT_EQ(r.messages[0],
            (ojson{{"role", "tool"}, {"tool_call_id", "call_1"}, {"name", "calculator"}, {"content", "8888888"}}));
  EXPECT_EQ(r.messages[1]["content"], "error: division by zero");
  EXPECT_EQ(r.messages[1]["tool_call_id"], "call_2");

  // A call the parser could not read: an error observation and the penalty.
  ojson malformed = assistant("<tool_call>{\"name\": \"calculator\", </tool_call>");
  malformed["parse_errors"] = ojson::array({"unterminated JSON object"});
  r = env->step("e1", malformed);
  ASSERT_TRUE(r.ok);
  EXPECT_FALSE(r.done);
  EXPECT_DOUBLE_EQ(r.reward, -0.25);
  ASSERT_EQ(r.messages.size(), 1u);
  EXPECT_EQ(r.messages[0]["role"], "user");
  EXPECT_EQ(r.messages[0]["content"],
            "Your tool call could not be read: unterminated JSON object. Call the calculator with a JSON object "
            "{\"name\": \"calculator\", \"arguments\": {\"expression\": \"...\"}}.");

  // A wrong tool name and bad arguments are tool errors, not parse errors.
  ojson wrong = calc_call("c3", R"({"expr": "1+1"})");
  wrong["tool_calls"].push_back(ojson{{"id", "c4"}, {"function", {{"name", "search"}, {"arguments", "{}"}}}});
  wrong["tool_calls"].push_back(ojson{{"id", "c5"}, {"function", {{"name", "calculator"}, {"arguments", "{oops"}}}});
  r = env->step("e1", wrong);
  ASSERT_EQ(r.messages.size(), 3u);
  EXPECT_EQ(r.messages[0]["content"], "error: the arguments must be {\"expression\": \"...\"}");
  EXPECT_EQ(r.messages[1]["content"], "error: unknown tool 'search'; the only tool is calculator");
  EXPECT_EQ(r.messages[2]["content"], "error: the arguments are not JSON: {oops");

  // No tool call: the final answer (commas allowed).
  r = env->step("e1", assistant("So the total is 8,888,888."));
  ASSERT_TRUE(r.ok);
  EXPECT_TRUE(r.done);
  EXPECT_EQ(r.reward, 1);
  ASSERT_TRUE(r.correct.has_value());
  EXPECT_TRUE(*r.correct);
  EXPECT_EQ(r.components, (std::vector<std::pair<std::string, double>>{
                              {"turns", 4}, {"tool_calls", 5}, {"tool_errors", 4}, {"malformed", 1}}));
  EXPECT_EQ(r.info, "answer 8888888, got 8888888");
  env->close("e1");
  EXPECT_FALSE(env->step("e1", assistant("1")).ok);  // closed

  // A generated problem, answered wrong.
  r = env->reset("e2", ojson{{"index", 0}, {"split", "train"}, {"seed", 0}});
  ASSERT_TRUE(r.ok);
  EXPECT_EQ(r.messages[1]["content"], calculator_problem(CalculatorOptions{}, 0, false, 0).question);
  r = env->step("e2", assistant("I think it is 12."));
  EXPECT_TRUE(r.done);
  EXPECT_EQ(r.reward, 0);
  EXPECT_FALSE(*r.correct);
  env->close("e2");

  // A bad row fails the episode, not the run.
  r = env->reset("e3", ojson{{"index", -1}});
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.error.find("row.index must be an integer >= 0"), std::string::npos) << r.error;
  EXPECT_EQ(env->failures(), 1);
}

// ---- the guessing game ----

TEST(GuessingEnvironment, Transcript) {
  GuessingEnvironment env(GuessOptions::from_params(ojson{{"n", 100}}));
  EnvReply r = env.reset("g", ojson{{"secret", 37}});
  ASSERT_TRUE(r.ok);
  EXPECT_EQ(r.messages, ojson::array({ojson{{"role", "user"},
                                            {"content",
                                             "I'm thinking of a number between 1 and 100. Guess it; I'll "
                                             "say higher or lower."}}}));
  EXPECT_TRUE(r.tools.is_null());
  const std::vector<std::pair<std::string, std::string>> turns = {{"My guess is 50.", "lower"},
                                                                  {"25", "higher"},
                                                                  {"no idea", "Please answer with a number."},
                                                                  {"Between 25 and 50, so 37", "correct"}};
  for (size_t t = 0; t < turns.size(); ++t) {
    r = env.step("g", assistant(turns[t].first));
    ASSERT_TRUE(r.ok);
    EXPECT_EQ(r.messages, ojson::array({ojson{{"role", "user"}, {"content", turns[t].second}}})) << t;
    EXPECT_EQ(r.done, t == 3);
    EXPECT_EQ(r.reward, t == 3 ? 1 : 0);
  }
  ASSERT_TRUE(r.correct.has_value());
  EXPECT_TRUE(*r.correct);
  EXPECT_EQ(r.components, (std::vector<std::pair<std::string, double>>{{"turns", 4}}));
  env.close("g");
}

TEST(GuessingEnvironment, DrawnSecretsPinnedAndInRange) {
  GuessOptions o;
  EXPECT_EQ(guess_secret(o, 0, false, 0), 62);
  EXPECT_EQ(guess_secret(o, 0, false, 1), 41);
  EXPECT_EQ(guess_secret(o, 0, true, 0), 94);
  o.n = 10;
  std::set<int64_t> seen;
  for (uint64_t i = 0; i < 200; ++i) {
    const int64_t s = guess_secret(o, 3, false, i);
    EXPECT_GE(s, 1);
    EXPECT_LE(s, 10);
    seen.insert(s);
  }
  EXPECT_EQ(seen.size(), 10u);
  GuessingEnvironment env(GuessOptions::from_params(ojson{{"seed", 5}}));  // the param's seed beats the row's
  ASSERT_TRUE(env.reset("a", ojson{{"index", 4}, {"split", "eval"}, {"seed", 99}}).ok);
  const int64_t secret = guess_secret(GuessOptions{}, 5, true, 4);
  EXPECT_EQ(env.step("a", assistant(std::to_string(secret))).messages[0]["content"], "correct");
}

// ---- options ----

TEST(EnvOptions, ErrorsNameTheField) {
  auto with = [](auto change) {
    EnvOptions o;
    o.kind = "program";
    o.program = {"python3", "x.py"};
    change(o);
    return error_of([&] { make_environment(o); });
  };
  EXPECT_NE(with([](EnvOptions& o) { o.kind = "calc"; })
                .find("env.kind: expected \"program\" or a built-in "
                      "(calculator, guess), got 'calc'"),
            std::string::npos);
  EXPECT_NE(with([](EnvOptions& o) { o.program.clear(); }).find("env.program: must name a command"), std::string::npos);
  EXPECT_NE(with([](EnvOptions& o) { o.kind = "guess"; }).find("env.program: only for kind \"program\""),
            std::string::npos);
  EXPECT_NE(with([](EnvOptions& o) { o.workers = 0; }).find("env.workers: must be in [1, 256], got 0"),
            std::string::npos);
  EXPECT_NE(with([](EnvOptions& o) { o.timeout_s = 0; }).find("env.timeout_s: must be > 0"), std::string::npos);
  EXPECT_NE(with([](EnvOptions& o) { o.env = {"NOEQUALS"}; }).find("env.env: each entry must be \"KEY=value\""),
            std::string::npos);
  EXPECT_NE(with([](EnvOptions& o) { o.params = ojson::array(); }).find("env.params: must be a table"),
            std::string::npos);
  EXPECT_NE(with([](EnvOptions& o) {
              o.kind = "calculator", o.program.clear(), o.params = {{"digit", 5}};
            }).find("env 'calculator': no param 'digit' (known: digits, operands, seed, malformed_penalty, tool)"),
            std::string::npos);
  EXPECT_NE(with([](EnvOptions& o) {
              o.kind = "calculator", o.program.clear(), o.params = {{"digits", {6, 3}}};
            }).find("param digits must lie in [1, 9] with lo <= hi, got [6,3]"),
            std::string::npos);
  EXPECT_NE(with([](EnvOptions& o) {
              o.kind = "guess", o.program.clear(), o.params = {{"n", 1}};
            }).find("env 'guess': param n must be an integer in [2, 1000000000], got 1"),
            std::string::npos);
  EXPECT_EQ(environment_names(), (std::vector<std::string>{"calculator", "guess"}));
}

TEST(ProgramReplies, ChecksNameTheField) {
  auto step_error = [](const char* text) { return error_of([&] { parse_step_reply(ojson::parse(text)); }); };
  EXPECT_NE(step_error(R"({"messages": [], "reward": 0})").find("step reply: no \"done\""), std::string::npos);
  EXPECT_NE(step_error(R"({"messages": [], "reward": 0, "done": "yes"})")
                .find("step reply: \"done\" must be true or false, got \"yes\""),
            std::string::npos);
  EXPECT_NE(step_error(R"({"messages": [], "reward": "1", "done": true})")
                .find("step reply: \"reward\" must be a finite number, got \"1\""),
            std::string::npos);
  EXPECT_NE(step_error(R"({"messages": [], "done": true})").find("step reply: no \"reward\""), std::string::npos);
  EXPECT_NE(step_error(R"({"messages": "hi", "reward": 0, "done": true})")
                .find("step reply: messages must be a list of {role, content} objects, got string"),
            std::string::npos);
  EXPECT_NE(step_error(R"({"messages": [{"role": "user", "content": 3}], "reward": 0, "done": true})")
                .find("step reply: messages[0].content must be a string, got 3"),
            std::string::npos);
  EXPECT_NE(step_error(R"({"messages": [{"content": "x"}], "reward": 0, "done": true})")
                .find("step reply: messages[0] has no \"role\""),
            std::string::npos);
  EXPECT_NE(step_error(R"({"messages": [], "reward": 0, "done": true, "correct": 1})")
                .find("step reply: \"correct\" must be true or false"),
            std::string::npos);
  EXPECT_NE(step_error(R"({"messages": [], "reward": 0, "done": true, "components": {"a": "x"}})")
                .find("step reply: components.a must be a finite number"),
            std::string::npos);
  auto reset_error = [](const char* text) { return error_of([&] { parse_reset_reply(ojson::parse(text)); }); };
  EXPECT_NE(reset_error(R"({"tools": []})").find("reset reply: no \"messages\""), std::string::npos);
  EXPECT_NE(reset_error(R"({"messages": []})").find("reset reply: messages must hold at least one message"),
            std::string::npos);
  EXPECT_NE(reset_error(R"({"messages": [{"role": "user", "content": "q"}], "tools": [{"type": "function"}]})")
                .find("reset reply: tools[0].function must be an object"),
            std::string::npos);
  EXPECT_NE(reset_error(R"({"messages": [{"role": "user", "content": "q"}], "tools": {}})")
                .find("reset reply: tools must be a list of tool schemas or null"),
            std::string::npos);

  // Client mode's reply: the episode's return, done implied; the same extras.
  const EnvReply run = parse_run_reply(ojson::parse(R"({"reward": 2, "correct": true, "components": {"calls": 3}})"));
  EXPECT_DOUBLE_EQ(run.reward, 2.0);
  EXPECT_TRUE(run.done);
  EXPECT_EQ(run.correct, std::optional<bool>(true));
  EXPECT_NE(error_of([] { parse_run_reply(ojson::parse(R"({"correct": true})")); }).find("run reply: no \"reward\""),
            std::string::npos);
  EXPECT_NE(error_of([] {
              parse_run_reply(ojson::parse(R"({"reward": "x"})"));
            }).find("run reply: \"reward\" must be a finite number"),
            std::string::npos);
  EXPECT_FALSE(
      make_environment({.kind = "guess"})->run("e", ojson::object(), ojson::object()).ok);  // built-ins run no agents

  const EnvReply ok = parse_step_reply(ojson::parse(
      R"({"messages": [{"role": "tool", "content": "4", "tool_call_id": "a"}], "reward": 0.5, "done": true,
          "correct": false, "components": {"turns": 3}, "info": "fine"})"));
  EXPECT_TRUE(ok.ok);
  EXPECT_EQ(ok.messages[0]["tool_call_id"], "a");
  EXPECT_DOUBLE_EQ(ok.reward, 0.5);
  EXPECT_TRUE(ok.done);
  EXPECT_EQ(ok.correct, std::optional<bool>(false));
  EXPECT_EQ(ok.components, (std::vector<std::pair<std::string, double>>{{"turns", 3}}));
  EXPECT_EQ(ok.info, "fine");
}

// ---- environment programs ----

// A worker on python/temper_env.py whose steps do what their content says (hang-once, crash, garbage, error,
// done), else echo; the info carries the worker index and the episodes it holds open.
constexpr const char* kWorkerPy = R"PY(
import os, sys, time
import temper_env
from temper_env import text, user

MARKER = sys.argv[1]
if os.path.exists(MARKER + ".nostart"):
    print("refusing to start", file=sys.stderr)
    sys.exit(1)
open_episodes = 0

class Echo(temper_env.Env):
    def __init__(self):
        global open_episodes
        open_episodes += 1
        self.turn = 0

    def close(self):
        global open_episodes
        open_episodes -= 1

    def reset(self, row):
        tools = [temper_env.tool_schema("echo", "Echo text.", {"text": {"type": "string"}})]
        return [user("hello from worker %d, index %s" % (self.worker, row.get("index")))], tools

    def step(self, message):
        self.turn += 1
        c = text(message)
        if c == "hang-once" and not os.path.exists(MARKER):
            open(MARKER, "w").close()
            time.sleep(60)
        if c == "crash":
            print("dying now", file=sys.stderr)
            sys.stderr.flush()
            os._exit(3)
        if c == "garbage":
            sys.stdout.write("this is not json\n")
            sys.stdout.flush()
        if c == "error":
            raise ValueError("bad move")
        info = "worker %d open %d episode %s" % (self.worker, open_episodes, self.episode)
        return ("echo: %s" % c, float(len(c)), c == "done",
                {"info": info, "components": {"turn": self.turn}, "correct": c == "done"})

temper_env.serve(Echo)
)PY";

// A worker speaking the protocol by hand, answering every step with a reply that breaks the rules.
constexpr const char* kRawPy = R"PY(
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    t = m.get("type")
    if t == "hello":
        r = {"ready": True}
    elif t == "reset":
        r = {"messages": [{"role": "user", "content": "q"}]}
    elif t == "step":
        r = {"messages": [{"role": "user", "content": "x"}], "reward": "lots", "done": False}
    else:
        r = {"ok": True}
    print(json.dumps(r), flush=True)
)PY";

class ProgramEnv : public ::testing::Test {
 protected:
  void SetUp() override {
    if (reward::find_executable("python3").empty()) GTEST_SKIP() << "python3 not on PATH";
    dir_ = fs::temp_directory_path() / ("temper_test_env_" + std::to_string(getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    write("worker.py", kWorkerPy);
    write("raw.py", kRawPy);
    write("exits.py", "import sys\nprint('cannot load the model weights', file=sys.stderr)\nsys.exit(2)\n");
  }
  void TearDown() override {
    if (!dir_.empty()) fs::remove_all(dir_);
  }
  void write(const std::string& name, const std::string& text) { std::ofstream(dir_ / name) << text; }
  EnvOptions options(int64_t workers, double timeout_s = 10, const std::string& script = "worker.py") {
    EnvOptions o;
    o.kind = "program";
    o.program = {"python3", (dir_ / script).string(), (dir_ / "hang.marker").string()};
    o.workers = workers;
    o.timeout_s = timeout_s;
    o.start_timeout_s = 20;
    o.env = {std::string("PYTHONPATH=") + TEMPER_SOURCE_DIR + "/python"};
    o.params = {{"name", "echo"}};
    return o;
  }
  fs::path dir_;
};

TEST_F(ProgramEnv, RoundTripOverOneAndThreeWorkers) {
  for (int64_t workers : {1, 3}) {
    ProgramEnvironment env(options(workers));
    EXPECT_EQ(env.name(), "echo");
    env.start();
    for (int e = 0; e < 6; ++e) {  // least loaded: 0, 1, 2, 0, 1, 2
      const std::string id = "ep" + std::to_string(e);
      EnvReply r = env.reset(id, ojson{{"index", e}, {"split", "train"}, {"seed", 0}});
      ASSERT_TRUE(r.ok) << r.error;
      const int k = static_cast<int>(e % workers);
      EXPECT_EQ(env.worker_of(id), k);
      EXPECT_EQ(r.messages, ojson::array({ojson{{"role", "user"},
                                                {"content", "hello from worker " + std::to_string(k) + ", index " +
                                                                std::to_string(e)}}}));
      ASSERT_EQ(r.tools.size(), 1u);
      EXPECT_EQ(r.tools[0]["function"]["name"], "echo");
    }
    for (int e = 0; e < 6; ++e) {
      const std::string id = "ep" + std::to_string(e);
      EnvReply r = env.step(id, assistant("hi " + id));
      ASSERT_TRUE(r.ok) << r.error;
      EXPECT_EQ(r.messages[0]["content"], "echo: hi " + id);
      EXPECT_DOUBLE_EQ(r.reward, static_cast<double>(("hi " + id).size()));
      EXPECT_FALSE(r.done);
      EXPECT_EQ(r.correct, std::optional<bool>(false));
      const int k = static_cast<int>(e % workers);
      EXPECT_EQ(r.info, "worker " + std::to_string(k) + " open " + std::to_string(6 / workers) + " episode " + id);
      r = env.step(id, assistant("done"));
      EXPECT_TRUE(r.done);
      EXPECT_EQ(r.correct, std::optional<bool>(true));
      EXPECT_EQ(r.components, (std::vector<std::pair<std::string, double>>{{"turn", 2}}));
    }
    for (int e = 0; e < 6; ++e) env.close("ep" + std::to_string(e));
    // close reached the workers: a new episode's worker holds only it.
    ASSERT_TRUE(env.reset("last", ojson::object()).ok);
    EXPECT_EQ(env.step("last", assistant("x")).info, "worker 0 open 1 episode last");
    env.close("last");
    EXPECT_EQ(env.failures(), 0);
    EXPECT_EQ(env.restarts(), 0);
  }
}

TEST_F(ProgramEnv, ManyEpisodesFromFourThreads) {
  ProgramEnvironment env(options(3));
  env.start();
  std::atomic<int> good{0};
  std::vector<std::thread> threads;
  std::vector<std::string> problems(4);
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int e = 0; e < 8; ++e) {
        const std::string id = "t" + std::to_string(t) + "e" + std::to_string(e);
        EnvReply r = env.reset(id, ojson{{"index", e}});
        if (!r.ok) {
          problems[static_cast<size_t>(t)] += "reset " + id + ": " + r.error + "\n";
          continue;
        }
        bool ok = true;
        for (int s = 0; s < 3; ++s) {
          const std::string say = id + " turn " + std::to_string(s);
          r = env.step(id, assistant(say));
          ok = ok && r.ok && r.messages[0]["content"] == "echo: " + say &&
               r.info.find("episode " + id) != std::string::npos &&
               r.components == std::vector<std::pair<std::string, double>>{{"turn", s + 1}};
        }
        env.close(id);
        if (ok)
          ++good;
        else
          problems[static_cast<size_t>(t)] += id + " went wrong: " + r.error + "\n";
      }
    });
  for (std::thread& t : threads) t.join();
  for (const std::string& p : problems) EXPECT_EQ(p, "");
  EXPECT_EQ(good.load(), 32);
  EXPECT_EQ(env.failures(), 0);
}

TEST_F(ProgramEnv, AHangIsKilledAtTimeoutAndItsWorkersEpisodesAreLost) {
  ProgramEnvironment env(options(1, 0.5));
  env.start();
  ASSERT_TRUE(env.reset("a", ojson::object()).ok);
  ASSERT_TRUE(env.reset("b", ojson::object()).ok);
  const auto t0 = std::chrono::steady_clock::now();
  EnvReply r = env.step("a", assistant("hang-once"));
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_FALSE(r.ok);
  EXPECT_LT(waited, 5.0);
  EXPECT_NE(r.error.find("env 'echo' worker 0 (python3 "), std::string::npos) << r.error;
  EXPECT_NE(r.error.find("no answer to step within timeout_s = 0.5 s"), std::string::npos) << r.error;
  r = env.step("b", assistant("hello"));
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.error.rfind("episode lost: worker 0 was restarted after: no answer to step within timeout_s = 0.5 s", 0),
            0u)
      << r.error;
  env.close("a");
  env.close("b");
  // Later episodes succeed on the restarted worker (the marker makes the hang happen once).
  ASSERT_TRUE(env.reset("c", ojson::object()).ok);
  r = env.step("c", assistant("hang-once"));
  EXPECT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.info, "worker 0 open 1 episode c");
  env.close("c");
  EXPECT_EQ(env.restarts(), 1);
  EXPECT_EQ(env.failures(), 2);
}

TEST_F(ProgramEnv, ACrashFailsTheEpisodeAndQuotesStderr) {
  ProgramEnvironment env(options(2));
  env.start();
  ASSERT_TRUE(env.reset("a", ojson::object()).ok);  // worker 0
  ASSERT_TRUE(env.reset("b", ojson::object()).ok);  // worker 1
  EnvReply r = env.step("a", assistant("crash"));
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.error.find("stopped answering during step (exited with status 3)"), std::string::npos) << r.error;
  EXPECT_NE(r.error.find("its stderr: dying now"), std::string::npos) << r.error;
  r = env.step("b", assistant("fine"));  // the other worker's episode goes on
  EXPECT_TRUE(r.ok) << r.error;
  env.close("a");
  ASSERT_TRUE(env.reset("c", ojson::object()).ok);  // worker 0 again, restarted
  EXPECT_EQ(env.worker_of("c"), 0);
  EXPECT_TRUE(env.step("c", assistant("fine")).ok);
  env.close("b");
  env.close("c");
  EXPECT_EQ(env.restarts(), 1);
  EXPECT_EQ(env.failures(), 1);
}

TEST_F(ProgramEnv, AWorkerThatCannotRestartFailsOneEpisodeThenIsAvoided) {
  ProgramEnvironment env(options(2));
  env.start();
  ASSERT_TRUE(env.reset("a", ojson::object()).ok);  // worker 0
  ASSERT_TRUE(env.reset("b", ojson::object()).ok);  // worker 1
  write("hang.marker.nostart", "");
  EXPECT_FALSE(env.step("a", assistant("crash")).ok);
  env.close("a");
  EnvReply r = env.reset("c", ojson::object());  // worker 0, the least loaded, cannot start again
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.error.find("env 'echo' worker 0 (python3 "), std::string::npos) << r.error;
  EXPECT_NE(r.error.find("could not be restarted"), std::string::npos) << r.error;
  EXPECT_NE(r.error.find("its stderr: refusing to start"), std::string::npos) << r.error;
  env.close("c");
  r = env.reset("d", ojson::object());  // worker 1, though it holds more episodes
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(env.worker_of("d"), 1);
  EXPECT_EQ(env.step("d", assistant("x")).info, "worker 1 open 2 episode d");
  env.close("b");
  env.close("d");
  EXPECT_EQ(env.failures(), 2);
  EXPECT_EQ(env.restarts(), 0);
}

TEST_F(ProgramEnv, AMalformedReplyKillsTheWorker) {
  ProgramEnvironment env(options(1));
  env.start();
  ASSERT_TRUE(env.reset("a", ojson::object()).ok);
  EnvReply r = env.step("a", assistant("garbage"));
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.error.find("malformed reply to step: not JSON"), std::string::npos) << r.error;
  EXPECT_NE(r.error.find("this is not json"), std::string::npos) << r.error;
  env.close("a");
  ASSERT_TRUE(env.reset("b", ojson::object()).ok);
  EXPECT_TRUE(env.step("b", assistant("x")).ok);
  env.close("b");
  EXPECT_EQ(env.restarts(), 1);
  EXPECT_EQ(env.failures(), 1);
}

TEST_F(ProgramEnv, AnErrorReplyFailsThatEpisodeOnly) {
  ProgramEnvironment env(options(1));
  env.start();
  ASSERT_TRUE(env.reset("a", ojson::object()).ok);
  ASSERT_TRUE(env.reset("b", ojson::object()).ok);
  EnvReply r = env.step("a", assistant("error"));
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.error.find("the environment reported an error at step: ValueError: bad move"), std::string::npos)
      << r.error;
  EXPECT_EQ(env.step("a", assistant("x")).error, r.error);  // the episode is over
  r = env.step("b", assistant("still here"));
  EXPECT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.info, "worker 0 open 2 episode b");
  env.close("a");
  EXPECT_EQ(env.step("b", assistant("x")).info, "worker 0 open 1 episode b");  // close reached the worker
  env.close("b");
  EXPECT_EQ(env.restarts(), 0);
  EXPECT_EQ(env.failures(), 1);
  EXPECT_EQ(env.step("b", assistant("x")).error, "step for episode 'b', which was never reset or is closed");
}

TEST_F(ProgramEnv, ARuleBreakingReplyFailsThatEpisodeNamingTheField) {
  ProgramEnvironment env(options(1, 10, "raw.py"));
  env.start();
  ASSERT_TRUE(env.reset("a", ojson::object()).ok);
  EnvReply r = env.step("a", assistant("x"));
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.error.find("step reply: \"reward\" must be a finite number, got \"lots\""), std::string::npos) << r.error;
  EXPECT_EQ(env.restarts(), 0);
  EXPECT_EQ(env.failures(), 1);
}

TEST_F(ProgramEnv, StartFailuresNameTheCommand) {
  EnvOptions o = options(1);
  o.program = {"temper-no-such-env-program", "--flag"};
  std::string e = error_of([&] { ProgramEnvironment(o).start(); });
  EXPECT_NE(e.find("env 'echo' worker 0 (temper-no-such-env-program --flag): cannot start "
                   "'temper-no-such-env-program': not found in PATH"),
            std::string::npos)
      << e;
  o = options(2, 10, "exits.py");
  e = error_of([&] { ProgramEnvironment(o).start(); });
  EXPECT_NE(e.find("exits.py"), std::string::npos) << e;
  EXPECT_NE(e.find("closed its output before answering the greeting (exited with status 2)"), std::string::npos) << e;
  EXPECT_NE(e.find("its stderr: cannot load the model weights"), std::string::npos) << e;
}

TEST_F(ProgramEnv, TheExampleGuessProgramPlaysAsTheBuiltIn) {
  EnvOptions o;
  o.kind = "program";
  o.program = {"python3", std::string(TEMPER_SOURCE_DIR) + "/examples/envs/guess_env.py"};
  o.params = {{"n", 1000}};
  std::unique_ptr<Environment> program = make_environment(o);
  program->start();
  EnvOptions b;
  b.kind = "guess";
  b.params = {{"n", 1000}};
  std::unique_ptr<Environment> builtin = make_environment(b);
  const std::vector<std::string> says = {
      "500", "Let me try 250.", "hmm", "-3", "1,000", "12.5 or so", "375", "437.0", "400 then 406", "the answer: 406"};
  EnvReply rp = program->reset("x", ojson{{"secret", 406}});
  EnvReply rb = builtin->reset("x", ojson{{"secret", 406}});
  ASSERT_TRUE(rp.ok) << rp.error;
  EXPECT_EQ(rp.messages, rb.messages);
  EXPECT_EQ(rp.tools, rb.tools);
  std::string transcript;
  for (const std::string& s : says) {
    rp = program->step("x", assistant(s));
    rb = builtin->step("x", assistant(s));
    ASSERT_TRUE(rp.ok) << rp.error;
    EXPECT_EQ(rp.messages, rb.messages) << s;
    EXPECT_EQ(rp.reward, rb.reward) << s;
    EXPECT_EQ(rp.done, rb.done) << s;
    EXPECT_EQ(rp.correct, rb.correct) << s;
    EXPECT_EQ(rp.components, rb.components) << s;
    transcript += rb.messages[0]["content"].get<std::string>() + "|";
    if (rb.done) break;
  }
  EXPECT_EQ(transcript,
            "lower|higher|Please answer with a number.|higher|lower|Please answer with a number.|higher|"
            "lower|correct|");
  program->close("x");
  builtin->close("x");
}

}  // namespace
}  // namespace temper::env
