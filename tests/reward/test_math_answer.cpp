// Math answers: extraction (#### / \boxed{} with nested braces, last wins / "The answer is") and a table of
// true and false equivalences (commas, signs, decimals, fractions, \frac, percent, tolerance, text fallback).
#include <gtest/gtest.h>

#include "temper/reward/math_answer.h"

using namespace temper::reward;

TEST(MathAnswer, ExtractGsm8k) {
  EXPECT_EQ(extract_gsm8k("3+4=7\n#### 7"), "7");
  EXPECT_EQ(extract_gsm8k("#### 5\nmore\n####  1,234 \n"), "1,234");  // last one, trimmed
  EXPECT_EQ(extract_gsm8k("so ##### 42"), "42");
  EXPECT_EQ(extract_gsm8k("no marker 42"), std::nullopt);
  EXPECT_EQ(extract_gsm8k("####   \n"), std::nullopt);
}

TEST(MathAnswer, ExtractBoxedNestedLastWins) {
  EXPECT_EQ(extract_boxed("first \\boxed{1} then \\boxed{\\frac{1}{2}}"), "\\frac{1}{2}");
  EXPECT_EQ(extract_boxed("$\\boxed{\\{a, {b}\\}}$"), "\\{a, {b}\\}");
  EXPECT_EQ(extract_boxed("\\fbox{12}"), "12");
  EXPECT_EQ(extract_boxed("\\boxed 5$"), "5");
  EXPECT_EQ(extract_boxed("\\boxed{3} and broken \\boxed{4"), "3");  // unbalanced last one is skipped
  EXPECT_EQ(extract_boxed("nothing"), std::nullopt);
  // 100k unclosed \boxed{ (once quadratic: 36.9 s, docs/PERFORMANCE.md) before a closed one, and after it: the closed
  // one is found.
  std::string many;
  for (int i = 0; i < 100000; ++i) many += "\\boxed{";
  EXPECT_EQ(extract_boxed(many + "x \\boxed{7}"), "7");
  EXPECT_EQ(extract_boxed("\\boxed{7} " + many), "7");
  EXPECT_EQ(extract_boxed(many), std::nullopt);
  EXPECT_EQ(extract_boxed("\\boxed{a{b}c} \\boxed{d{e}"), "a{b}c");  // the last one's inner brace closes, not it
}

TEST(MathAnswer, ExtractAnswerIs) {
  EXPECT_EQ(extract_answer_is("Adding up, the answer is 42."), "42");
  EXPECT_EQ(extract_answer_is("The final answer is: $3.5$. Done."), "$3.5$");
  EXPECT_EQ(extract_answer_is("The answer is **18**"), "18");
  EXPECT_EQ(extract_answer_is("The answer is \\boxed{7}."), "7");
  EXPECT_EQ(extract_answer_is("The Answer Is 1,000\nbye"), "1,000");
  EXPECT_EQ(extract_answer_is("no conclusion"), std::nullopt);
}

TEST(MathAnswer, ExtractOrderPrefersHashes) {
  EXPECT_EQ(extract_math_answer("The answer is 3. \\boxed{4}\n#### 5"), "5");
  EXPECT_EQ(extract_math_answer("The answer is 3. \\boxed{4}"), "4");
  EXPECT_EQ(extract_math_answer("the answer is 3"), "3");
  EXPECT_EQ(extract_math_answer("I think 3"), std::nullopt);  // no last-number fallback
}

TEST(MathAnswer, ParseNumbers) {
  auto v = [](const char* s) { return parse_math_number(s).value().value; };
  EXPECT_DOUBLE_EQ(v("1,234,567"), 1234567);
  EXPECT_DOUBLE_EQ(v("+5"), 5);
  EXPECT_DOUBLE_EQ(v("-0.25"), -0.25);
  EXPECT_DOUBLE_EQ(v(".5"), 0.5);
  EXPECT_DOUBLE_EQ(v("1e-3"), 0.001);
  EXPECT_DOUBLE_EQ(v("-3/4"), -0.75);
  EXPECT_DOUBLE_EQ(v("-\\frac{3}{4}"), -0.75);
  EXPECT_DOUBLE_EQ(v("\\dfrac{1}{8}"), 0.125);
  EXPECT_DOUBLE_EQ(v("\\frac12"), 0.5);
  EXPECT_DOUBLE_EQ(v("$18.00"), 18);
  EXPECT_DOUBLE_EQ(v("x = 5"), 5);
  EXPECT_DOUBLE_EQ(v("18 dollars"), 18);
  EXPECT_DOUBLE_EQ(v("5\\text{ cm}"), 5);
  EXPECT_TRUE(parse_math_number("50%").value().percent);
  EXPECT_DOUBLE_EQ(v("50\\%"), 50);
  for (const char* bad : {"1,2", "12,34", "1,2345", "abc", "", "1/0", "3 or 4", "--5", "1.2.3", "\\frac{1}"})
    EXPECT_EQ(parse_math_number(bad), std::nullopt) << bad;
}

struct EquivCase {
  const char* a;
  const char* b;
  bool equal;
};

TEST(MathAnswer, EquivalenceTable) {
  const EquivCase cases[] = {
      // Equal.
      {"1,234", "1234", true},
      {"+7", "7", true},
      {"7.0", "7", true},
      {"7.", "7", true},
      {"0.5", "1/2", true},
      {"\\frac{1}{2}", "0.5", true},
      {"\\dfrac{3}{4}", "3/4", true},
      {"-\\frac{2}{4}", "-0.5", true},
      {"50%", "50", true},
      {"50%", "0.5", true},
      {"12.5\\%", "0.125", true},
      {"$1,000", "1000", true},
      {"\\$5.00", "5", true},
      {"1/3", "0.3333333333", true},          // within rel 1e-6
      {"1000000", "1000000.5", true},         // rel 5e-7
      {"1e3", "1000", true},
      {"x = -3", "-3", true},
      {"\\boxed-free text", "\\boxed-free text", true},
      {"  Paris. ", "paris", true},
      {"$\\text{Blue}$", "blue", true},
      {"(1, 2)", "(1,2)", true},
      {"\\{1,2\\}", "\\{1, 2\\}", true},
      {"18 dollars", "18", true},
      {"0", "0.0", true},
      {"-0", "0", true},
      // Not equal.
      {"1,234", "1.234", false},
      {"7", "-7", false},
      {"0.5", "0.51", false},
      {"1/3", "0.333", false},                // rel 1e-3
      {"1000000", "1000002", false},          // rel 2e-6
      {"50%", "5", false},
      {"50%", "0.5%", false},
      {"\\frac{1}{2}", "\\frac{1}{3}", false},
      {"paris", "london", false},
      {"", "", false},
      {"12", "12a", false},
      {"x+1", "1+x", false},                  // no symbolic algebra
      {"0", "0.0000001", false},
      {"3", "three", false},
      {"1,2", "12", false},
  };
  int n = 0;
  for (const auto& c : cases) {
    EXPECT_EQ(math_answers_equal(c.a, c.b), c.equal) << "'" << c.a << "' vs '" << c.b << "'";
    EXPECT_EQ(math_answers_equal(c.b, c.a), c.equal) << "'" << c.b << "' vs '" << c.a << "' (swapped)";
    ++n;
  }
  EXPECT_GE(n, 40);
}

TEST(MathAnswer, ToleranceOptions) {
  MathEquivOptions loose;
  loose.rel_tol = 1e-2;
  EXPECT_TRUE(math_answers_equal("1/3", "0.333", loose));
  MathEquivOptions abs;
  abs.abs_tol = 1e-6;
  EXPECT_TRUE(math_answers_equal("0", "0.0000001", abs));
  MathEquivOptions no_pct;
  no_pct.percent_as_fraction = false;
  EXPECT_FALSE(math_answers_equal("50%", "0.5", no_pct));
  EXPECT_TRUE(math_answers_equal("50%", "50", no_pct));
}
