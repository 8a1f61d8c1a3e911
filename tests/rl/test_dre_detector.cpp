// DRE's answer detector presets on real completion styles of a `dataset` task (GSM8K's "<<a=b>>b" lines and
// "#### 72", a \boxed{} answer restated after a check, an R1-style <think> block, a user regex): each finds the first
// verified step boundary and the start of the answer section, the online hook forks there with the preset's close
// forced; a dataset task with no detector configured is refused before the model loads, naming rl.dre.detector, and
// a regex that does not compile is refused naming rl.dre.regex.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "common/error_of.h"
#include "common/scratch.h"
#include "rl/byte_codec.h"
#include "temper/rl/method_spec.h"
#include "temper/rl/methods/dre.h"
#include "temper/tasks/arithmetic.h"
#include "temper/tasks/dataset.h"
#include "temper/tasks/mixture.h"

using namespace temper;
using namespace temper::rl;
using test::byte_codec;
using test::ids;

namespace {

std::shared_ptr<tasks::DatasetTask> dataset() {
  static std::shared_ptr<tasks::DatasetTask> t = [] {
    const std::string path = test::write_scratch(
        "dre_detector", "gsm.jsonl",
        R"({"prompt": "Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in May. How many clips did Natalia sell altogether in April and May?", "answer": "Natalia sold 48/2 = <<48/2=24>>24 clips in May.\nNatalia sold 48+24 = <<48+24=72>>72 clips altogether in April and May.\n#### 72"})"
        "\n");
    tasks::DatasetConfig c;
    c.path = path;
    return std::make_shared<tasks::DatasetTask>(c);
  }();
  return t;
}

const tasks::Problem& natalia() {
  static tasks::Problem p = dataset()->problem(tasks::Split::train, 0);
  return p;
}

struct Case {
  DreDetector kind;
  std::string regex, close;
  std::string text;      // a correct completion that keeps going after its answer appeared
  std::string verified;  // its prefix up to the first verified step boundary
  std::string section;   // where its answer section starts (a substring of text)
  std::string forced;    // the close the preset forces
};

std::vector<Case> cases() {
  return {
      {DreDetector::gsm8k, "", "",
       "Natalia sold 48/2 = <<48/2=24>>24 clips in May.\nNatalia sold 48+24 = <<48+24=72>>72 clips altogether.\n"
       "Let me double-check: 24 + 48 = 72.\n#### 72",
       "Natalia sold 48/2 = <<48/2=24>>24 clips in May.\nNatalia sold 48+24 = <<48+24=72>>72 clips altogether.\n",
       "#### 72", "#### "},
      {DreDetector::boxed, "", "",
       "In May she sold 48 / 2 = 24 clips.\nSo altogether she sold $48 + 24 = \\boxed{72}$ clips.\n"
       "Wait, let me verify this again. April: 48, May: 24, total 72.\nTherefore, the answer is \\boxed{72}.",
       "In May she sold 48 / 2 = 24 clips.\nSo altogether she sold $48 + 24 = \\boxed{72}$ clips.\n",
       "Therefore, the answer is \\boxed{72}.", "The final answer is \\boxed{"},
      {DreDetector::think, "", "",
       "<think>\nOkay, so in April she sold 48 clips.\nIn May she sold half of that, which is 24.\n"
       "Adding them up, 48 + 24 = 72, so the answer is 72.\nHmm, but wait, let me re-read the question to be sure.\n"
       "Yes, April and May together. 72.\n</think>\n\nNatalia sold \\boxed{72} clips.",
       "<think>\nOkay, so in April she sold 48 clips.\nIn May she sold half of that, which is 24.\n"
       "Adding them up, 48 + 24 = 72, so the answer is 72.\n",
       "</think>", "</think>\n\n"},
      {DreDetector::regex, "[Tt]otal so far: \\K[0-9]+", "The answer is ",
       "April: 48 clips. Total so far: 48\nMay: 48 / 2 = 24 clips. Total so far: 72\nRecount: 48 + 24 = 72\n"
       "The answer is 72.",
       "April: 48 clips. Total so far: 48\nMay: 48 / 2 = 24 clips. Total so far: 72\n", "The answer is 72.",
       "The answer is "},
  };
}

MethodEnv env_of(std::shared_ptr<const tasks::Task> task, const PromptCodec& codec) {
  MethodEnv e;
  e.task = std::move(task);
  e.codec = &codec;
  e.max_new = 256;
  e.context = 1024;
  return e;
}

}  // namespace

TEST(DreDetector, EachPresetFindsTheFirstVerifiedBoundaryAndTheAnswerSection) {
  const PromptCodec codec = byte_codec();
  const tasks::Problem& p = natalia();
  ASSERT_EQ(p.answer, "72");
  for (const Case& c : cases()) {
    SCOPED_TRACE(std::string(enum_name(kDreDetectorNames, c.kind)));
    const AnswerDetector det(c.kind, c.regex, c.close, dataset());
    EXPECT_EQ(det.close(), c.forced);
    ASSERT_TRUE(dataset()->verify(p, c.text).correct);
    auto accept = [&](const std::string& cand) { return det.accepts(p, cand); };
    Emergence e = find_emergence(det, p, codec, ids(c.text), accept);
    EXPECT_EQ(e.at, static_cast<int64_t>(c.verified.size()));
    ASSERT_NE(c.text.find(c.section), std::string::npos);
    EXPECT_EQ(e.close, static_cast<int64_t>(c.text.find(c.section)));
    // The same completion with a wrong number where the answer appeared: no verified boundary before the section.
    std::string wrong = c.text;
    const size_t at = c.verified.rfind("72");
    ASSERT_NE(at, std::string::npos);
    wrong.replace(at, 2, "71");
    const int64_t later = find_emergence(det, p, codec, ids(wrong), accept).at;
    EXPECT_TRUE(later == -1 || later > static_cast<int64_t>(c.verified.size())) << later;
  }
}

TEST(DreDetector, CandidatesOfEachPresetOnSingleLines) {
  const tasks::Problem& p = natalia();
  const AnswerDetector gsm(DreDetector::gsm8k, "", "", dataset());
  EXPECT_EQ(gsm.candidate(p, "She sold 48+24 = <<48+24=72>>72 clips.\n"), std::optional<std::string>("72"));
  // env::last_number's normal form (what the environments and python/temper_env.py read as the number)
  EXPECT_EQ(gsm.candidate(p, "It costs $1,200.50.\n"), std::optional<std::string>("1200.5"));
  EXPECT_EQ(gsm.candidate(p, "The change is -3 degrees\n"), std::optional<std::string>("-3"));
  EXPECT_EQ(gsm.candidate(p, "No numbers here.\n"), std::nullopt);
  EXPECT_EQ(gsm.candidate(p, "48+24=72"), std::nullopt);             // not a step boundary
  EXPECT_EQ(gsm.candidate(p, "#### 72\n48+24=72\n"), std::nullopt);  // inside the answer section
  const AnswerDetector boxed(DreDetector::boxed, "", "", dataset());
  EXPECT_EQ(boxed.candidate(p, "so $x = \\boxed{\\frac{1}{2}}$ here\n"), std::optional<std::string>("\\frac{1}{2}"));
  EXPECT_EQ(boxed.candidate(p, "We get 72.\n"), std::nullopt);
  const AnswerDetector think(DreDetector::think, "", "", dataset());
  EXPECT_EQ(think.candidate(p, "<think>\nSo the answer is 72.\n"), std::optional<std::string>("72"));
  EXPECT_EQ(think.candidate(p, "<think>\nthat gives \\boxed{72} and 5 more\n"), std::optional<std::string>("72"));
  EXPECT_EQ(think.candidate(p, "<think>\n48 + 24 = 72\n"), std::optional<std::string>("72"));
  EXPECT_EQ(think.candidate(p, "<think>\nx\n</think>\nThe answer is 72.\n"), std::nullopt);  // thinking closed
  const AnswerDetector re(DreDetector::regex, "result=\\K\\w+", "", dataset());
  EXPECT_EQ(re.close(), "#### ");
  EXPECT_EQ(re.candidate(p, "result=3 then result=72 ok\n"), std::optional<std::string>("72"));
  EXPECT_EQ(re.candidate(p, "no result here\n"), std::nullopt);
  // The task preset keeps the procedural family's rule and close.
  auto arith = std::make_shared<tasks::ArithmeticTask>(tasks::ArithmeticConfig{});
  const AnswerDetector own(DreDetector::task, "", "", arith);
  EXPECT_EQ(own.close(), "#### ");
  EXPECT_EQ(own.candidate(p, "7*3=21\n"), std::optional<std::string>("21"));
  // rl.dre.close replaces a preset's close and its marker.
  const AnswerDetector custom(DreDetector::gsm8k, "", "Final: ", dataset());
  EXPECT_EQ(custom.answer_section("a=1\nFinal: 72", false), 4u);
  EXPECT_EQ(custom.answer_section("a=1\n#### 72", false), std::string::npos);
}

TEST(DreDetector, TheOnlineHookForksAtTheVerifiedBoundaryWithThePresetsClose) {
  const PromptCodec codec = byte_codec();
  for (const Case& c : cases()) {
    SCOPED_TRACE(std::string(enum_name(kDreDetectorNames, c.kind)));
    DreConfig cfg;
    cfg.detector = c.kind;
    cfg.regex = c.regex;
    cfg.close = c.close;
    Dre dre(cfg);
    MethodEnv env = env_of(dataset(), codec);
    dre.attach(env);
    std::vector<tasks::Problem> problems(1, natalia());
    RolloutRound round{0, 0, &problems, 0};
    rollout::RolloutHook* h = dre.rollout_hook(round);
    ASSERT_NE(h, nullptr);
    rollout::RolloutRequest q;
    rollout::Completion comp;
    std::vector<size_t> forks;
    for (int32_t t : ids(c.text)) {
      comp.tokens.push_back(t);
      rollout::HookDecision d = h->after_token(q, comp);
      if (d.forks) {
        forks.push_back(comp.tokens.size());
        EXPECT_EQ(d.fork_forced, ids(c.forced));
        EXPECT_EQ(d.fork_max_new, static_cast<int64_t>(c.forced.size()) + cfg.answer_budget);
      }
    }
    EXPECT_EQ(forks, std::vector<size_t>{c.verified.size()});
  }
}

TEST(DreDetector, ADatasetWithoutAConfiguredDetectorIsRefusedNamingTheKey) {
  EXPECT_FALSE(task_has_answer_detector(*dataset()));
  EXPECT_TRUE(task_has_answer_detector(tasks::ArithmeticTask(tasks::ArithmeticConfig{})));
  tasks::MixtureTask mixed(
      {{"tasks", "arithmetic,dataset"}, {"dataset.path", test::scratch_path("dre_detector", "gsm.jsonl")}});
  EXPECT_FALSE(task_has_answer_detector(mixed));
  std::unique_ptr<MethodSetup> s = kDreMethod.setup();
  const std::string msg = test::error_of([&] { s->check_task(*dataset()); });
  EXPECT_NE(msg.find("rl.dre.detector"), std::string::npos) << msg;
  EXPECT_NE(msg.find("task 'dataset' has no answer detector"), std::string::npos) << msg;
  EXPECT_NE(msg.find("\"gsm8k\""), std::string::npos) << msg;
  EXPECT_EQ(test::error_of([&] { s->check_task(tasks::ArithmeticTask(tasks::ArithmeticConfig{})); }), "(no error)");
  auto* dre = dynamic_cast<MethodSetupOf<DreConfig>*>(s.get());
  ASSERT_NE(dre, nullptr);
  dre->cfg.detector = DreDetector::gsm8k;
  EXPECT_EQ(test::error_of([&] { s->check_task(*dataset()); }), "(no error)");
  // Attaching directly (the API) refuses the same way.
  const PromptCodec codec = byte_codec();
  Dre plain{DreConfig{}};
  EXPECT_NE(test::error_of([&] { plain.attach(env_of(dataset(), codec)); }).find("rl.dre.detector"), std::string::npos);
  // The regex key: compiled at validation, named in the error; set without detector = "regex", refused.
  DreConfig bad;
  bad.detector = DreDetector::regex;
  bad.regex = "answer: (\\d+";
  EXPECT_NE(test::error_of([&] { bad.validate(); }).find("rl.dre.regex"), std::string::npos);
  bad.regex.clear();
  EXPECT_NE(test::error_of([&] { bad.validate(); }).find("needs a PCRE2 pattern"), std::string::npos);
  DreConfig stray;
  stray.regex = "x";
  EXPECT_NE(test::error_of([&] { stray.validate(); }).find("set detector = \"regex\""), std::string::npos);
}
