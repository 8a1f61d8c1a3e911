// The example reward programs (examples/rewards/*.py) through reward::ProgramReward: math_exact.py gives the
// builtin math checker's rewards (the dataset task's verify: extract_math_answer + math_answers_equal) and its
// extractions on 1000 varied completions; format, json_valid and length_penalty give exact rewards on a handful;
// code_tests runs in the sandbox when `temper sandbox` is there.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "temper/reward/math_answer.h"
#include "temper/reward/program_reward.h"

namespace temper::reward {
namespace {

using json = nlohmann::json;

const std::string kExamples = std::string(TEMPER_TEST_SOURCE_DIR) + "/../examples/rewards/";

std::unique_ptr<ProgramReward> start_example(const std::string& file, int64_t workers = 1,
                                             std::vector<std::string> args = {}, std::vector<std::string> env = {}) {
  ProgramOptions o;
  o.name = file;
  o.command = {"python3", kExamples + file};
  for (std::string& a : args) o.command.push_back(std::move(a));
  o.workers = workers;
  o.timeout_s = 120;
  o.start_timeout_s = 30;
  o.env = std::move(env);
  auto p = std::make_unique<ProgramReward>(o);
  p->start();
  return p;
}

// Deterministic choices (std::mt19937's sequence is fixed by the standard; its distributions are not).
struct Pick {
  std::mt19937 rng{20240934u};
  uint32_t below(uint32_t n) { return static_cast<uint32_t>(rng() % n); }
  template <class T, size_t N>
  const T& of(const std::array<T, N>& a) {
    return a[below(N)];
  }
};

// A reference answer and forms of it a completion may write: equal ones and wrong ones.
struct AnswerCase {
  std::string reference;
  std::vector<std::string> forms;
};

std::string with_commas(long long v) {
  std::string digits = std::to_string(v < 0 ? -v : v), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return (v < 0 ? "-" : "") + out;
}

AnswerCase answer_case(Pick& pick) {
  const uint32_t kind = pick.below(9);
  if (kind <= 2) {  // integers, large ones with commas, negatives
    long long v = static_cast<long long>(pick.below(kind == 0 ? 100 : 2000000));
    if (pick.below(4) == 0) v = -v;
    const std::string s = std::to_string(v), c = with_commas(v), w = std::to_string(v + 1 + pick.below(5));
    std::string ref = pick.below(3) == 0 ? c : s;
    if (pick.below(8) == 0) ref = "$" + ref;
    return {ref,
            {s, c, s + ".0", s + ".00", "$" + c, "\\$" + s, s + " dollars", "x = " + s, "{" + s + "}", "\\text{" + s + "}",
             s + "\\text{ cm}", s + "%", "+" + s, s + ".", "**" + s + "**", w, w + ".0", "-" + w, c + "0", s + "1,00",
             s + " apples and 3 pears", "\xE2\x88\x92" + s, s + "e0", "1,2345", s + "/1",
             "\xC2\xA0" + s + "\xE3\x80\x80",                                              // non-ASCII spaces
             s.size() > 6 ? s.substr(0, s.size() - 3) + "," + s.substr(s.size() - 3) : c}};  // "1234,567"
  }
  if (kind == 3) {  // decimals
    const int a = static_cast<int>(pick.below(100)), b = static_cast<int>(pick.below(100));
    char buf[64], close[64], far[64];
    std::snprintf(buf, sizeof buf, "%d.%02d", a, b);
    std::snprintf(close, sizeof close, "%d.%02d0000001", a, b);
    std::snprintf(far, sizeof far, "%d.%02d01", a, b);
    const std::string s = buf;
    return {s, {s, s + "0", close, far, "$" + s, s + "\\%", "0" + s, s.substr(0, s.size() - 1), "." + s}};
  }
  if (kind == 4) {  // fractions
    const int a = 1 + static_cast<int>(pick.below(9)), b = 2 + static_cast<int>(pick.below(8));
    const std::string fa = std::to_string(a), fb = std::to_string(b);
    char dec[64];
    std::snprintf(dec, sizeof dec, "%.10g", static_cast<double>(a) / b);
    std::string ref = pick.below(2) ? fa + "/" + fb : "\\frac{" + fa + "}{" + fb + "}";
    return {ref,
            {fa + "/" + fb, "\\frac{" + fa + "}{" + fb + "}", "\\dfrac{" + fa + "}{" + fb + "}", "\\frac" + fa + fb,
             "\\tfrac{" + fa + "}{" + fb + "}", dec, std::to_string(2 * a) + "/" + std::to_string(2 * b),
             "-\\frac{" + fa + "}{" + fb + "}", fa + "/" + fb + "/2", fb + "/" + fa, "\\frac{" + fa + "}{0}",
             "\\left(" + fa + "/" + fb + "\\right)", "\\frac{" + fa + "}{" + fb}};
  }
  if (kind == 5) {  // percents
    const int v = 1 + static_cast<int>(pick.below(99));
    const std::string s = std::to_string(v);
    char frac[32];
    std::snprintf(frac, sizeof frac, "%g", v / 100.0);
    std::string ref = pick.below(3) == 0 ? frac : s + "%";
    return {ref, {s + "%", s + "\\%", frac, s, s + " %", s + " percent", std::to_string(v + 1) + "%", s + "%%"}};
  }
  if (kind == 6) {  // multiple choice and words
    static const std::array<std::string, 6> kWords = {"B", "Paris", "yes", "caf\xC3\xA9", "\xE6\x9D\xB1\xE4\xBA\xAC",
                                                      "(C)"};
    const std::string w = pick.of(kWords);
    std::string lower;
    for (char c : w) lower += (c >= 'A' && c <= 'Z') ? static_cast<char>(c + 32) : c;
    return {w, {w, lower, "\\text{" + w + "}", "\\textbf{" + w + "}", " " + w + " .", w + "!", "CAF\xC3\x89", "No", "(" + w + ")",
                "$" + w + "$", "\xC2\xBD"}};
  }
  if (kind == 7) {  // expressions (no CAS: text compare)
    static const std::array<std::string, 5> kExpr = {"x+1", "\\sqrt{2}", "2\\pi", "(1, 2)", "\\{1,2\\}"};
    const std::string e = pick.of(kExpr);
    return {e, {e, "x + 1", "1+x", "\\sqrt 2", "2 \\pi", "(1,2)", "\\displaystyle " + e, "\\boxed{" + e + "}", e + "."}};
  }
  // exponents and odd numbers
  return {pick.below(2) ? "1000" : "1e3",
          {"1e3", "1E3", "1000", "1,000", "1,000.0", "10e2", "1e+3", "1000.000001", "1000.01", "1e", "1,0000", ".", "-",
           "1e400", "1e-400", "0x3E8", "\xEF\xBC\x91\xEF\xBC\x90\xEF\xBC\x90\xEF\xBC\x90"}};
}

std::string completion_with(Pick& pick, const std::string& form, const std::string& wrong) {
  static const std::array<std::string, 6> kReasoning = {
      "Let me think step by step.\n", "First, 3 + 4 = 7. Then 7 * 2 = 14.\n", "",
      "We compute the total: 12 apples, 5 eaten.\nSo what remains is the answer.\n", "  \n\t\n",
      "Combien ? D\xC3\xA9j\xC3\xA0 vu: \xCF\x80 \xE2\x89\x88 3.14 \xF0\x9F\x98\x80\n"};
  const std::string r = pick.of(kReasoning);
  switch (pick.below(24)) {
    case 0: return r + "#### " + form;
    case 1: return r + "#### " + form + "\n";
    case 2: return r + "####" + form + "\nThat is the final answer.";
    case 3: return r + "##### " + form + "  \n";
    case 4: return r + "#### " + wrong + "\nWait, let me recheck.\n#### " + form;
    case 5: return r + "#### " + form + "\nNo wait.\n#### " + wrong;
    case 6: return r + "#### \n" + form;
    case 7: return r + "The final answer is $\\boxed{" + form + "}$.";
    case 8: return r + "\\boxed{" + wrong + "} is wrong, so \\boxed{" + form + "}";
    case 9: return r + "\\boxed {" + form + "}";
    case 10: return r + "\\boxed " + form + " done";
    case 11: return r + "\\boxed{" + form + " and then \\boxed{" + wrong;
    case 12: return r + "\\fbox{" + form + "}\n";
    case 13: return r + "\\boxed{}\\boxed{" + form + "}";
    case 14: return r + "The answer is " + form + ".";
    case 15: return r + "So the answer is: **" + form + "**. Thanks for asking.";
    case 16: return r + "THE ANSWER IS " + form + "\nand more text";
    case 17: return r + "I believe the answer is \\boxed{" + form + "}, clearly.";
    case 18: return r + "The answer is " + wrong + ". Actually no, the answer is " + form;
    case 19: return r + "I computed " + form + " but I am not sure.";
    case 20: return r + "answer is";
    case 21: return "";
    case 22: return r + "#### " + form + " #### " + wrong;
    default: return r + "The answer is " + form + "\n#### " + wrong;
  }
}

TEST(ExampleRewards, MathExactGivesTheBuiltinCheckersRewardsOn1000Completions) {
  Pick pick;
  std::vector<std::string> items, completions, references;
  for (int i = 0; i < 1000; ++i) {
    AnswerCase c = answer_case(pick);
    const std::string form = c.forms[pick.below(static_cast<uint32_t>(c.forms.size()))];
    const std::string wrong = c.forms[pick.below(static_cast<uint32_t>(c.forms.size()))];
    const std::string reference = pick.below(50) == 0 ? std::string() : c.reference;
    std::string completion = completion_with(pick, form, wrong);
    json item = {{"id", "0/" + std::to_string(i)}, {"problem_id", "p" + std::to_string(i)}, {"completion", completion}};
    if (!reference.empty()) item["answer"] = reference;
    item["row"] = {{"prompt", "q"}, {"answer", reference}};
    items.push_back(item.dump());
    completions.push_back(std::move(completion));
    references.push_back(reference);
  }
  auto math = start_example("math_exact.py", 2);
  ProgramReward& p = *math;
  std::vector<ProgramScore> got;
  for (size_t b = 0; b < items.size(); b += 256) {  // batches as a run would send them
    std::vector<std::string> batch(items.begin() + static_cast<long>(b),
                                   items.begin() + static_cast<long>(std::min(items.size(), b + 256)));
    std::vector<ProgramScore> s = p.score(batch, static_cast<int64_t>(b / 256));
    got.insert(got.end(), s.begin(), s.end());
  }
  ASSERT_EQ(got.size(), items.size());
  int correct = 0, extracted = 0, mismatches = 0;
  for (size_t i = 0; i < items.size(); ++i) {
    const std::optional<std::string> ex = extract_math_answer(completions[i]);
    const bool ok = ex && !references[i].empty() && math_answers_equal(*ex, references[i]);  // DatasetTask::verify
    correct += ok;
    extracted += ex.has_value();
    ASSERT_TRUE(got[i].ok) << got[i].error;
    const std::string info = ex ? "answer: " + *ex : "no answer";
    if (got[i].reward != (ok ? 1.0 : 0.0) || got[i].correct != ok || got[i].info != info) {
      ++mismatches;
      ADD_FAILURE() << "item " << i << ": completion " << json(completions[i]).dump() << ", reference "
                    << json(references[i]).dump() << ": builtin " << ok << " (" << info << "), math_exact.py "
                    << got[i].reward << " (" << got[i].info << ")";
    }
  }
  std::printf("math_exact.py vs the builtin checker: 1000 completions, %d correct, %d with an answer, %d mismatches\n",
              correct, extracted, mismatches);
  EXPECT_EQ(mismatches, 0);
  EXPECT_GE(correct, 250);  // both classes well represented
  EXPECT_LE(correct, 750);
  EXPECT_GE(extracted, 700);
  EXPECT_EQ(p.failures(), 0);
}

std::vector<ProgramScore> score_completions(ProgramReward& p, const std::vector<json>& items) {
  std::vector<std::string> texts;
  for (size_t i = 0; i < items.size(); ++i) {
    json it = items[i];
    it["id"] = "0/" + std::to_string(i);
    texts.push_back(it.dump());
  }
  std::vector<ProgramScore> got = p.score(texts, 0);
  for (const ProgramScore& s : got) EXPECT_TRUE(s.ok) << s.error;
  return got;
}

double component(const ProgramScore& s, const std::string& name) {
  for (const auto& [k, v] : s.components)
    if (k == name) return v;
  ADD_FAILURE() << "no component " << name;
  return -1;
}

TEST(ExampleRewards, FormatScoresEachCheck) {
  auto p = start_example("format.py");
  std::vector<ProgramScore> got = score_completions(
      *p, {{{"completion", "3 + 4 = 7\n#### 7"}},
          {{"completion", "#### 7"}},                       // no reasoning
          {{"completion", "3 + 4 = 7\n#### 7\nmore words"}},  // not last
          {{"completion", "#### 6\n3 + 4 = 7\n#### 7"}},      // not single
          {{"completion", "So $\\boxed{\\frac{1}{2}}$."}},
          {{"completion", "\\boxed{7} \\boxed{8} then"}},  // two boxes, text after
          {{"completion", "It is seven."}},
          {{"completion", "reasoning\n####   \n"}}});
  const std::vector<double> want = {1.0, 0.75, 0.75, 0.75, 1.0, 0.5, 0.0, 0.0};
  for (size_t i = 0; i < want.size(); ++i) EXPECT_DOUBLE_EQ(got[i].reward, want[i]) << i << " " << got[i].info;
  EXPECT_DOUBLE_EQ(component(got[1], "reasoning"), 0.0);
  EXPECT_DOUBLE_EQ(component(got[1], "answer"), 1.0);
  EXPECT_DOUBLE_EQ(component(got[2], "last"), 0.0);
  EXPECT_DOUBLE_EQ(component(got[3], "single"), 0.0);
  EXPECT_EQ(got[6].info, "missing: answer, reasoning, last, single");
}

TEST(ExampleRewards, JsonValidParsesTheFirstBlockAndCountsRequiredKeys) {
  auto p = start_example("json_valid.py", 1, {"--required-keys", "name"});
  const json row_keys = {{"required_keys", {"name", "country"}}};
  std::vector<ProgramScore> got = score_completions(
      *p, {{{"completion", "{\"name\": \"Paris\", \"country\": \"France\"}"}, {"row", row_keys}},
          {{"completion", "Here:\n```json\n{\"name\": \"Paris\"}\n```\nand ```json\n[]\n```"}, {"row", row_keys}},
          {{"completion", "```\n[1, 2]\n```"}, {"row", row_keys}},
          {{"completion", "{name: Paris}"}, {"row", row_keys}},
          {{"completion", "{\"name\": 1}"}, {"row", {{"required_keys", "name, country, size"}}}},
          {{"completion", "{\"country\": 1}"}},  // the command line's keys: name
          {{"completion", "{\"country\": 1}"}, {"row", {{"required_keys", json::array()}}}}});
  const std::vector<double> want = {1.0, 0.75, 0.5, 0.0, 0.5 + 0.5 / 3, 0.5, 1.0};
  for (size_t i = 0; i < want.size(); ++i) EXPECT_DOUBLE_EQ(got[i].reward, want[i]) << i << " " << got[i].info;
  EXPECT_DOUBLE_EQ(component(got[3], "parses"), 0.0);
  EXPECT_DOUBLE_EQ(component(got[1], "keys"), 0.5);
  EXPECT_EQ(got[1].info, "valid JSON; missing country");
}

TEST(ExampleRewards, LengthPenaltyGrowsPastTheTargetFromArgvOrTheEnvironment) {
  auto chars = start_example("length_penalty.py", 1, {"--target", "10", "--scale", "20"});
  std::vector<ProgramScore> got = score_completions(*chars, {{{"completion", "short"}},
                                                             {{"completion", std::string(10, 'a')}},
                                                             {{"completion", std::string(20, 'a')}},
                                                             {{"completion", std::string(1000, 'a')}}});
  const std::vector<double> want = {0.0, 0.0, -0.5, -1.0};
  for (size_t i = 0; i < want.size(); ++i) EXPECT_DOUBLE_EQ(got[i].reward, want[i]) << i << " " << got[i].info;
  EXPECT_DOUBLE_EQ(component(got[2], "length"), 20.0);
  auto words = start_example("length_penalty.py", 1, {"--max-penalty", "0.75"},
                                      {"LENGTH_TARGET=3", "LENGTH_SCALE=2", "LENGTH_UNIT=words"});
  got = score_completions(*words, {{{"completion", "one two three"}},
                                  {{"completion", "one  two\nthree four"}},
                                  {{"completion", "a b c d e f g h"}}});
  EXPECT_DOUBLE_EQ(got[0].reward, 0.0);
  EXPECT_DOUBLE_EQ(got[1].reward, -0.5);
  EXPECT_DOUBLE_EQ(got[2].reward, -0.75);  // capped
  EXPECT_DOUBLE_EQ(component(got[1], "length"), 4.0);
}

// The sandbox's one-line answer to a trivial request, or why there is none.
std::string sandbox_probe(const std::string& bin) {
  const std::string cmd = "echo '{\"code\":\"x = 1\",\"tests\":[\"assert x == 1\"]}' | '" + bin + "' sandbox 2>&1";
  FILE* f = ::popen(cmd.c_str(), "r");
  if (!f) return "popen failed";
  std::string out;
  char buf[512];
  while (std::fgets(buf, sizeof buf, f)) out += buf;
  const int rc = ::pclose(f);
  return rc == 0 ? out : "exit " + std::to_string(rc) + ": " + out;
}

TEST(ExampleRewards, CodeTestsRunsTheRowsTestsInTheSandbox) {
  const std::string bin = TEMPER_TEST_TEMPER_BIN;
  const std::string probe = sandbox_probe(bin);
  if (probe.find("\"passed\":1") == std::string::npos)
    GTEST_SKIP() << "`temper sandbox` is not usable here (" << bin << "): " << probe.substr(0, 300);
  auto p = start_example("code_tests.py", 2, {}, {"TEMPER_BIN=" + bin});
  const json tests = {"assert add(2, 3) == 5", "assert add(-1, 1) == 0", "assert add(0, 0) == 0"};
  std::vector<ProgramScore> got = score_completions(
      *p, {{{"completion", "```python\ndef add(a, b):\n    return a + b\n```"}, {"row", {{"tests", tests}}}},
          {{"completion", "def add(a, b):\n    return a - b"}, {"row", {{"tests", tests}}}},
          {{"completion", "```py\nwhile True:\n    pass\n```"}, {"row", {{"tests", tests}}}},
          {{"completion", "```python\nimport os\nos.system('echo hi')\ndef add(a, b): return a + b\n```"},
           {"row", {{"tests", tests}}}}});
  EXPECT_DOUBLE_EQ(got[0].reward, 1.0);
  EXPECT_EQ(got[0].correct, true);
  EXPECT_NEAR(got[1].reward, 1.0 / 3, 1e-12);  // only add(0, 0) == 0 holds
  EXPECT_DOUBLE_EQ(got[2].reward, 0.0);
  EXPECT_NE(got[2].info.find("0/3"), std::string::npos) << got[2].info;
  EXPECT_DOUBLE_EQ(component(got[1], "total"), 3.0);
  std::vector<std::string> no_tests = {json({{"id", "0/0"}, {"completion", "x = 1"}, {"row", json::object()}}).dump()};
  EXPECT_FALSE(p->score(no_tests, 1)[0].ok);  // a row without tests fails that sample
}

}  // namespace
}  // namespace temper::reward
