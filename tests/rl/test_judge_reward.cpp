// LLM judges (issue 34 point 3): the template's placeholders, literal braces and errors; the score parser
// ("Score: 7", "7/10", decimals, negatives, the first number otherwise) and the range check; the choice
// parser (first label, whole word, any case, the longest at one position); and on SmolLM2-135M-Instruct (Q4_1
// GGUF from the bootstrap's cache; skipped without it) the judge term through the app's factory: greedy scores
// equal over two runs, failures counted, info holding the judgement; the Turing model judge's ratings in 1..7.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "common/test_data.h"
#include "temper/app/judge_setup.h"
#include "temper/core/error.h"
#include "temper/rl/judge_reward.h"
#include "temper/rl/methods/rcsd.h"
#include "temper/rl/methods/turing.h"
#include "temper/rl/pairwise_judge.h"
#include "temper/rl/turing_reward.h"

using namespace temper;
using namespace temper::rl;
namespace fs = std::filesystem;

namespace {

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(JudgeTemplate, FillsEveryPlaceholderOnce) {
  JudgeTemplate t("Q: {question}\nA: {completion}\nGold: {answer}\nRubric: {rubric}\n{completion}",
                  judge_placeholders(), "t");
  EXPECT_EQ(t.fill({"2+2?", "4 {answer}", "4", "be exact"}),
            "Q: 2+2?\nA: 4 {answer}\nGold: 4\nRubric: be exact\n4 {answer}");  // values are not rescanned
  EXPECT_TRUE(t.uses(0) && t.uses(1) && t.uses(2) && t.uses(3));
  JudgeTemplate only("{completion}", judge_placeholders(), "t");
  EXPECT_FALSE(only.uses(0));
  EXPECT_EQ(only.fill({"q", "c", "a", "r"}), "c");
}

TEST(JudgeTemplate, LiteralBraces) {
  JudgeTemplate t("Answer as JSON: {{\"score\": N}} for {completion} }", judge_placeholders(), "t");
  EXPECT_EQ(t.fill({"", "x", "", ""}), "Answer as JSON: {\"score\": N} for x }");
  JudgeTemplate u("{{completion}} {{{completion}}}", judge_placeholders(), "t");
  EXPECT_EQ(u.fill({"", "x", "", ""}), "{completion} {x}");
}

TEST(JudgeTemplate, UnknownPlaceholderIsAnErrorNamingIt) {
  std::string e = error_of([] { JudgeTemplate("{completion} vs {reference}", judge_placeholders(), "reward 'j'"); });
  EXPECT_NE(e.find("reward 'j'"), std::string::npos) << e;
  EXPECT_NE(e.find("unknown placeholder {reference}"), std::string::npos) << e;
  EXPECT_NE(e.find("{question}"), std::string::npos) << e;  // the known ones are listed
  e = error_of([] { JudgeTemplate("{completion} {Question}", judge_placeholders(), "t"); });
  EXPECT_NE(e.find("{Question}"), std::string::npos) << e;  // names are case-sensitive
  e = error_of([] { JudgeTemplate("{completion} {oops", judge_placeholders(), "t"); });
  EXPECT_NE(e.find("unclosed '{'"), std::string::npos) << e;
}

TEST(JudgeParse, Scores) {
  struct Case {
    const char* text;
    std::optional<double> want;
  };
  const Case cases[] = {
      {"7", 7},
      {"Score: 7", 7},
      {"score:8.5 because it is right", 8.5},
      {"**Score:** 9", 9},
      {"The final score is 6.", 6},
      {"I give it a score of 3 out of 10", 3},
      {"Step 1: check. Step 2: verify. Score: 4", 4},  // "score" wins over earlier numbers
      {"The answer gets 7/10.", 7},
      {"Among 3 attempts this is 8 / 10", 8},  // N/M wins over the first number
      {"2 out of 5", 2},
      {"Rating: -3 (poor)", -3},
      {"score = -2.25", -2.25},
      {"It is worth +4.", 4},
      {"7-10 range, say 8", 7},  // the first number; '-' after a digit is no sign
      {"The reply 1.5 is fine", 1.5},
      {"Version v2 ok, 6", 6},  // digits inside a word are no number
      {"Scores vary; 5", 5},    // "Scores" is not the word "score"
      {"no number here", std::nullopt},
      {"", std::nullopt},
      {"Score: excellent", std::nullopt},
  };
  for (const Case& c : cases) {
    std::optional<double> got = parse_judge_score(c.text);
    ASSERT_EQ(got.has_value(), c.want.has_value()) << c.text;
    if (got) {
      EXPECT_DOUBLE_EQ(*got, *c.want) << c.text;
    }
  }
}

TEST(JudgeParse, ScoreRangeAndReward) {
  JudgeConfig j;
  j.model = "m", j.prompt_template = "{completion}";
  j.min_score = 1, j.max_score = 5;
  std::string why;
  EXPECT_DOUBLE_EQ(*judge_value(j, "Score: 3", &why), 0.5);
  EXPECT_DOUBLE_EQ(*judge_value(j, "5/5", &why), 1.0);
  EXPECT_DOUBLE_EQ(*judge_value(j, "1", &why), 0.0);
  EXPECT_FALSE(judge_value(j, "Score: 7", &why));
  EXPECT_NE(why.find("outside [1, 5]"), std::string::npos) << why;
  EXPECT_FALSE(judge_value(j, "Score: 0.5", &why));
  EXPECT_FALSE(judge_value(j, "Score: -1", &why));
  EXPECT_FALSE(judge_value(j, "I cannot judge this.", &why));
  EXPECT_NE(why.find("no score"), std::string::npos) << why;
}

TEST(JudgeParse, Choices) {
  const std::vector<std::string> labels = {"correct", "incorrect", "partially correct"};
  struct Case {
    const char* text;
    std::optional<size_t> want;
  };
  const Case cases[] = {
      {"correct", 0},
      {"CORRECT.", 0},
      {"Verdict: Incorrect", 1},              // whole word: "incorrect" holds no "correct"
      {"incorrect, not correct", 1},          // the first occurring
      {"This is partially correct.", 2},      // the longest at one position
      {"correctness unclear", std::nullopt},  // not a whole word
      {"The answer is wrong", std::nullopt},
      {"", std::nullopt},
      {"(correct)", 0},
  };
  for (const Case& c : cases) {
    std::optional<size_t> got = parse_judge_choice(c.text, labels);
    ASSERT_EQ(got.has_value(), c.want.has_value()) << c.text;
    if (got) {
      EXPECT_EQ(*got, *c.want) << c.text;
    }
  }
  JudgeConfig j;
  j.parse = JudgeParse::choice;
  j.labels = {"yes", "no"};
  EXPECT_DOUBLE_EQ(*judge_value(j, "Yes, it is.", nullptr), 1.0);  // default: 1 for the first label
  EXPECT_DOUBLE_EQ(*judge_value(j, "no", nullptr), 0.0);
  j.label_rewards = {0.25, -1};
  EXPECT_DOUBLE_EQ(*judge_value(j, "yes", nullptr), 0.25);
  EXPECT_DOUBLE_EQ(*judge_value(j, "NO!", nullptr), -1);
  std::string why;
  EXPECT_FALSE(judge_value(j, "maybe", &why));
  EXPECT_NE(why.find("none of the labels"), std::string::npos);
}

TEST(JudgeParse, InfoIsShortened) {
  EXPECT_EQ(judge_info("  Score:\n\n 7  "), "Score: 7");
  std::string longer(500, 'x');
  EXPECT_EQ(judge_info(longer, 10), "xxxxxxxxxx...");
}

TEST(JudgeModelLoader, WithoutOneLoadingIsAnError) {
  set_judge_model_loader(nullptr);
  std::string e = error_of([] { load_judge_model("m.gguf", "cpu", "rl.turing.judge_model"); });
  EXPECT_NE(e.find("rl.turing.judge_model"), std::string::npos) << e;
}

TEST(ModelJudge, RatingsFromJudgements) {
  EXPECT_EQ(ModelJudge::rating_of("Score: 6"), 6);
  EXPECT_EQ(ModelJudge::rating_of("I'd say 5/7"), 5);
  EXPECT_EQ(ModelJudge::rating_of("Score: 2.6"), 3);  // rounded
  EXPECT_EQ(ModelJudge::rating_of("Score: 9"), 0);    // out of 1..7: none
  EXPECT_EQ(ModelJudge::rating_of("Score: 0"), 0);
  EXPECT_EQ(ModelJudge::rating_of("B, surely"), 0);
}

TEST(ModelJudge, ConfigErrorsNameTheKey) {
  TuringConfig c;
  c.judge = TuringJudge::model;
  std::string e = error_of([&] { c.validate(); });
  EXPECT_NE(e.find("rl.turing.judge_model is required"), std::string::npos) << e;
  c.judge_model = "m.gguf";
  c.validate();  // the built-in template is valid
  c.judge_template = "{a} vs {b} for {user}";
  e = error_of([&] { c.validate(); });
  EXPECT_NE(e.find("rl.turing.judge_template: unknown placeholder {user}"), std::string::npos) << e;
  c.judge_template = "{history} {a}";
  e = error_of([&] { c.validate(); });
  EXPECT_NE(e.find("must contain {a} and {b}"), std::string::npos) << e;
  RcsdConfig r;
  r.rubric_writer = "m.gguf";
  r.validate();
  r.rubric_prompt = "{question} {solution}";
  e = error_of([&] { r.validate(); });
  EXPECT_NE(e.find("rl.rcsd.rubric_prompt: unknown placeholder {solution}"), std::string::npos) << e;
}

// A pairwise judge that counts its batches: turing_rewards asks every pair at once, hard zeros not at all.
struct BatchCountingJudge : PairwiseJudge {
  int batches = 0;
  size_t pairs = 0;
  std::string name() const override { return "counting"; }
  int rate(const tasks::Problem&, const std::string&, const std::string&) override { return 4; }
  std::vector<int> rate_all(const std::vector<Pair>& ps) override {
    ++batches, pairs += ps.size();
    return std::vector<int>(ps.size(), 5);
  }
};

TEST(ModelJudge, TuringRewardsAskOneBatch) {
  tasks::Problem p;
  p.id = "c1", p.answer = "sounds good, thanks", p.history = {"hi there", "ok thanks"}, p.context = "Assistant: Done.";
  const std::string good = "<reasoning>I agree</reasoning>\n[HUMAN]: great, thanks a lot";
  const std::string zero = "[HUMAN]: no reasoning here";  // hard zero: no reasoning block
  BatchCountingJudge j;
  std::vector<TuringReward> rs = turing_rewards(j, {&p, &p, &p}, {&good, &zero, &good}, TuringRewardConfig{});
  EXPECT_EQ(j.batches, 1);
  EXPECT_EQ(j.pairs, 2u);
  EXPECT_TRUE(rs[1].hard_zero);
  EXPECT_EQ(rs[0].rating, 5);
  EXPECT_EQ(rs[0].total, rs[2].total);
  TuringReward one = turing_reward(j, p, good, TuringRewardConfig{});  // the single form agrees
  EXPECT_EQ(one.total, rs[0].total);
}

TEST(JudgeTerm, TheStreamIsTheShortBasisFnv1aOfTheQueryId) {
  // Pinned: a sampled judgement of a query stays the one earlier runs drew (the values before core/fnv1a.h).
  EXPECT_EQ(judge_stream("0/0"), 0x4894335025acb266ull);
  EXPECT_EQ(judge_stream("3/1"), 0x2faecd5017e21af4ull);
  EXPECT_EQ(judge_stream(""), 1469598103934665603ull);  // the basis itself
}

using test::smollm2_path;

RewardTermConfig judge_term(JudgeParse parse) {
  RewardTermConfig c;
  c.name = "judge";
  JudgeConfig j;
  j.model = smollm2_path();
  j.parse = parse;
  if (parse == JudgeParse::score) {
    j.prompt_template =
        "Question: {question}\nReference answer: {answer}\nStudent answer: {completion}\n\nRate the student answer "
        "from 0 to 10. Reply with \"Score: N\".";
  } else {
    j.prompt_template =
        "Question: {question}\nReference answer: {answer}\nStudent answer: {completion}\n\nIs the student answer "
        "correct? Reply with one word: correct or incorrect.";
    j.labels = {"correct", "incorrect"};
  }
  j.max_new = 16;
  c.judge = j;
  return c;
}

TEST(JudgeSmolLM2, ScoresGreedilyAndReproducibly) {
  SKIP_WITHOUT_SMOLLM2();
  JudgeFactory make = app::install_judges("cpu");
  std::vector<tasks::Problem> ps(3);
  const char* q[] = {"What is 2 + 3?", "What is the capital of France?", "What colour is the sky on a clear day?"};
  const char* a[] = {"5", "Paris", "blue"};
  for (size_t i = 0; i < ps.size(); ++i) ps[i].id = "p" + std::to_string(i), ps[i].prompt = q[i], ps[i].answer = a[i];
  const std::vector<std::string> completions = {"2 + 3 = 5", "The capital of France is Berlin.", "The sky is blue.",
                                                "I don't know."};
  std::vector<RewardQuery> qs;
  for (size_t i = 0; i < completions.size(); ++i)
    qs.push_back({&ps[std::min<size_t>(i, 2)], &completions[i], "0/" + std::to_string(i)});
  for (JudgeParse parse : {JudgeParse::score, JudgeParse::choice}) {
    std::unique_ptr<RewardTerm> term = make(judge_term(parse));
    std::vector<TermScore> s1 = term->score(qs, 0);
    std::vector<TermScore> s2 = term->score(qs, 0);
    ASSERT_EQ(s1.size(), qs.size());
    int64_t failed = 0;
    for (size_t i = 0; i < qs.size(); ++i) {
      EXPECT_EQ(s1[i].value, s2[i].value) << i;
      EXPECT_EQ(s1[i].failed, s2[i].failed) << i;
      EXPECT_EQ(s1[i].info, s2[i].info) << i;
      EXPECT_FALSE(s1[i].info.empty()) << i;
      EXPECT_GE(s1[i].value, 0.0);
      EXPECT_LE(s1[i].value, 1.0);
      if (s1[i].failed) {
        ++failed;
        EXPECT_EQ(s1[i].info.rfind("failed: ", 0), 0u) << s1[i].info;
      }
      std::printf("%s judge on %zu: %s%.2f  %s\n", parse == JudgeParse::score ? "score" : "choice", i,
                  s1[i].failed ? "FAILED " : "", s1[i].value, s1[i].info.c_str());
    }
    EXPECT_EQ(term->failures(), 2 * failed);
  }
}

TEST(JudgeSmolLM2, UnparseableJudgementsAreFailures) {
  SKIP_WITHOUT_SMOLLM2();
  JudgeFactory make = app::install_judges("cpu");
  RewardTermConfig c = judge_term(JudgeParse::choice);
  c.judge->labels = {"zyzzyva", "quux"};  // words the judge will not say
  c.judge->max_new = 4;
  std::unique_ptr<RewardTerm> term = make(c);
  tasks::Problem p;
  p.prompt = "What is 1 + 1?";
  const std::string done = "2";
  std::vector<TermScore> s = term->score({{&p, &done, "0/0"}, {&p, &done, "0/1"}}, 3);
  EXPECT_TRUE(s[0].failed && s[1].failed);
  EXPECT_EQ(term->failures(), 2);
}

TEST(JudgeSmolLM2, BadTemplateFailsBeforeLoading) {
  JudgeFactory make = app::install_judges("cpu");
  RewardTermConfig c = judge_term(JudgeParse::score);
  c.judge->model = "/nonexistent/model.gguf";
  c.judge->prompt_template = "{completion} {gold}";
  std::string e = error_of([&] { make(c); });
  EXPECT_NE(e.find("unknown placeholder {gold}"), std::string::npos) << e;
}

TEST(JudgeSmolLM2, TuringModelJudgeRatesPairsReproducibly) {
  SKIP_WITHOUT_SMOLLM2();
  app::install_judges("cpu");
  TuringConfig c;
  c.judge = TuringJudge::model;
  c.judge_model = smollm2_path();
  c.judge_max_new = 12;
  ModelJudge judge(load_judge_model(c.judge_model, "cpu", "test"), kModelJudgeTemplate, c.judge_max_new);
  tasks::Problem p;
  p.id = "c1", p.answer = "lol ok, send me the list", p.history = {"can u help w my essay", "thx!! :)"};
  p.context = "Assistant: Sure, here are three ideas for your essay.";
  const std::string a = "Thank you for your assistance. How can I help you further?", b = p.answer;
  std::vector<int> r1 = judge.rate_all({{&p, &a, &b}, {&p, &b, &a}});
  std::vector<int> r2 = judge.rate_all({{&p, &a, &b}, {&p, &b, &a}});
  EXPECT_EQ(r1, r2);
  for (int r : r1) {
    EXPECT_GE(r, 1);
    EXPECT_LE(r, 7);
  }
  std::printf("model judge ratings: %d %d, failures %lld\n", r1[0], r1[1], static_cast<long long>(judge.failures()));
  EXPECT_EQ(judge.failures() % 2, 0);  // the same judgements failed both times
}

}  // namespace
