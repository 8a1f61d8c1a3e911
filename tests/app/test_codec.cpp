// The prompt codec: a recipe's user template phrases each problem inside the chat template (or raw text),
// the system prompt comes first, rows with their own chat messages are left alone (every turn rendered, their
// own system turn instead of the system prompt), and a template without {question} is refused with a message.
// Prompt lengths of a task in tokens (measure_prompts). Prompts a method builds around a question (ZPPO, REVES, RCSD)
// hold the question as asked, once (fair RL's preference goes before it).
#include <gtest/gtest.h>

#include <fstream>
#include <memory>

#include "temper/app/codec.h"
#include "temper/core/error.h"
#include "temper/rl/derived_problem.h"
#include "temper/rl/methods/fair.h"
#include "temper/rl/methods/rcsd.h"
#include "temper/rl/methods/zppo.h"
#include "temper/rl/revision.h"
#include "temper/tasks/dataset.h"
#include "temper/tasks/task.h"
#include "temper/text/tokenizer.h"

using namespace temper;

namespace {
std::shared_ptr<const text::Tokenizer> smollm2() {
  const std::string dir = std::string(TEMPER_SOURCE_DIR) + "/tests/data/tokenizer/smollm2/";
  return std::make_shared<text::Tokenizer>(
      text::Tokenizer::from_hf_files(dir + "tokenizer.json", dir + "tokenizer_config.json"));
}
}  // namespace

TEST(PromptCodec, UserTemplatePhrasesTheProblemInsideTheChatTemplate) {
  auto tok = smollm2();
  tasks::Problem p;
  p.prompt = "8+13=";
  const auto ids = app::make_codec(tok, {}, "chat", "Be brief.", "Calculate {question} then {question}.").encode_prompt(p);
  EXPECT_EQ(tok->decode(ids, false),
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nCalculate 8+13= then 8+13=.<|im_end|>\n"
            "<|im_start|>assistant\n");
  // without a system prompt SmolLM2's template writes its own
  const std::string smol = "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n";
  EXPECT_EQ(tok->decode(app::make_codec(tok, {}, "chat").encode_prompt(p), false),
            smol + "<|im_start|>user\n8+13=<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(tok->decode(app::make_codec(tok, {}, "raw", "", "Q: {question}").encode_prompt(p), false), "Q: 8+13=");
  tasks::Problem m;  // a dataset row with its own messages keeps them as they are
  m.prompt = "ignored";
  m.messages = {{"user", "hi"}};
  EXPECT_EQ(tok->decode(app::make_codec(tok, {}, "chat", "", "Calculate {question}").encode_prompt(m), false),
            smol + "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n");
  try {
    app::make_codec(tok, {}, "chat", "", "Calculate this");
    FAIL() << "a template without {question} was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("{question}"), std::string::npos) << e.what();
  }
}

TEST(PromptCodec, MethodPromptsHoldTheQuestionAsAskedOnce) {
  auto tok = smollm2();
  rl::PromptCodec c = app::make_codec(tok, {}, "raw", "", "Calculate {question} and end with ####.");
  tasks::Problem p;
  p.id = "arithmetic/train/3";
  p.prompt = "8+13=";
  p.answer = "21";
  tasks::Problem bcq = rl::zppo_reformulate(p, c, "{question}\nCandidates:\n{candidates}Solve it.",
                                            "<candidate>21</candidate>", "", "bcq");
  const std::string asked = "Calculate 8+13= and end with ####.";
  EXPECT_EQ(bcq.asked, asked + "\nCandidates:\n<candidate>21</candidate>Solve it.");
  EXPECT_EQ(tok->decode(c.encode_prompt(bcq), false), bcq.asked);  // not wrapped a second time
  EXPECT_EQ(bcq.prompt, "8+13=");                                  // the plain question, for checkers that read it
  EXPECT_EQ(bcq.answer, "21");
  EXPECT_EQ(bcq.id, "arithmetic/train/3#bcq");
  tasks::Problem rev = rl::revision_problem(p, "#### 20", rl::RevisionConfig{}, c);
  EXPECT_EQ(tok->decode(c.encode_prompt(rev), false).rfind(asked + "\nPrevious attempt:\n#### 20\n", 0), 0u);
  // a revision of a revision keeps the first question as asked, not asked twice
  tasks::Problem rev2 = rl::revision_problem(rev, "#### 19", rl::RevisionConfig{}, c);
  EXPECT_EQ(rev2.asked.find("Calculate"), 0u);
  EXPECT_EQ(rev2.asked.find("Calculate", 1), std::string::npos);
  tasks::Problem rubric = rl::rcsd_teacher_problem(p, c, "- shows steps", "Rubric:\n{rubric}\n\n{question}");
  EXPECT_EQ(tok->decode(c.encode_prompt(rubric), false), "Rubric:\n- shows steps\n\n" + asked);
  tasks::Problem pref = rl::fair_condition(p, c, "<pref {p}>\n", {0.25, 0.75});
  EXPECT_EQ(tok->decode(c.encode_prompt(pref), false), "<pref 0.25,0.75>\n" + asked);
  // `temper eval --preference ... --revisions K`: the revision prompt asks the conditioned question, the
  // preference and the user template each once
  tasks::Problem pref_rev = rl::revision_problem(pref, "#### 20", rl::RevisionConfig{}, c);
  const std::string sent = tok->decode(c.encode_prompt(pref_rev), false);
  EXPECT_EQ(sent.rfind("<pref 0.25,0.75>\n" + asked + "\nPrevious attempt:\n#### 20\n", 0), 0u) << sent;
  EXPECT_EQ(sent.find("<pref", 1), std::string::npos) << sent;
  EXPECT_EQ(pref_rev.prompt, "8+13=");
  // one pass: a model's text that holds a key (a candidate quoting "{wrong_answers}") is not expanded
  EXPECT_EQ(rl::fill_template("{candidates}|{wrong_answers}",
                              {{"{candidates}", "say {wrong_answers}"}, {"{wrong_answers}", "5"}}),
            "say {wrong_answers}|5");
  // without a user template the question goes in as it is
  rl::PromptCodec bare = app::make_codec(tok, {}, "raw");
  EXPECT_EQ(rl::zppo_reformulate(p, bare, "{candidates}{question}", "<c>", "", "bcq").asked, "<c>8+13=");
}

TEST(PromptCodec, CheckersOfMethodPromptsStillReadThePlainQuestion) {
  // countdown and rubric_proxy read the numbers from the problem's prompt: a candidate question or a
  // preference prefix around the question as asked (user template) must not hide them from the checker.
  auto tok = smollm2();
  rl::PromptCodec c = app::make_codec(tok, {}, "chat", "", "Compute {question} and end with #### <answer>.");
  auto countdown = tasks::make_task("countdown", {});
  tasks::Problem p = countdown->problem(tasks::Split::train, 5);
  tasks::Problem bcq =
      rl::zppo_reformulate(p, c, rl::ZppoConfig{}.bcq_template, "<candidate>\nx\n</candidate>\n", "", "bcq");
  EXPECT_NE(bcq.asked.find("Compute " + p.prompt + " and end with"), std::string::npos) << bcq.asked;
  EXPECT_EQ(countdown->verify(bcq, p.gold_solution).reward, 1.0);
  EXPECT_EQ(countdown->verify(bcq, "#### 1+1").reward, 0.0);
  // the chat codec sends the method's text as the user turn, the template inside it once
  const std::string chat = tok->decode(c.encode_prompt(bcq), false);
  EXPECT_NE(chat.find("<|im_start|>user\n" + bcq.asked + "<|im_end|>"), std::string::npos) << chat;
  EXPECT_EQ(chat.find("Compute", chat.find("Compute") + 1), std::string::npos) << chat;

  auto proxy = tasks::make_task("rubric_proxy", {});
  tasks::Problem q = proxy->problem(tasks::Split::train, 2);
  tasks::Problem pref = rl::fair_condition(q, c, "<pref {p}>\n", {0.5, 0.5});
  EXPECT_EQ(pref.asked.rfind("<pref 0.50,0.50>\nCompute ", 0), 0u) << pref.asked;
  EXPECT_EQ(proxy->verify(pref, q.gold_solution).correct, true);
}

TEST(PromptCodec, ChatRowsRenderEveryTurnThroughTheChatTemplate) {
  // A TRL conversational row (system, a first exchange, the question, the gold answer) loaded by the dataset
  // task and rendered through SmolLM2's template: the row's system turn replaces model.system_prompt, the
  // history is kept, the gold assistant turn is not asked, the prompt ends with the generation prompt.
  auto tok = smollm2();
  const std::string path = ::testing::TempDir() + "codec_chat_rows.jsonl";
  {
    std::ofstream f(path);
    f << R"({"messages": [{"role": "system", "content": "Answer with #### N."}, {"role": "user", "content": "1+1?"},)"
      << R"( {"role": "assistant", "content": "#### 2"}, {"role": "user", "content": "And 2+3?"},)"
      << R"( {"role": "assistant", "content": "2+3 = 5\n#### 5"}], "answer": 5})"
      << "\n"
      << R"({"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"}]})"
      << "\n";
  }
  const std::vector<tasks::Problem> rows = tasks::load_jsonl_problems(path);
  ASSERT_EQ(rows.size(), 2u);
  const std::string asked =
      "<|im_start|>system\nAnswer with #### "
      "N.<|im_end|>\n<|im_start|>user\n1+1?<|im_end|>\n<|im_start|>assistant\n#### 2"
      "<|im_end|>\n<|im_start|>user\nAnd 2+3?<|im_end|>\n<|im_start|>assistant\n";
  EXPECT_EQ(tok->decode(app::make_codec(tok, {}, "chat").encode_prompt(rows[0]), false), asked);
  EXPECT_EQ(tok->decode(app::make_codec(tok, {}, "chat", "Be brief.", "Q: {question}").encode_prompt(rows[0]), false),
            asked);
  // SFT's row: the prompt, then the gold completion and the end of turn
  rl::PromptCodec c = app::make_codec(tok, {}, "chat");
  EXPECT_EQ(tok->decode(c.encode_completion(rows[0].gold_solution), false), "2+3 = 5\n#### 5<|im_end|>");
  // without a system turn in the row: model.system_prompt, else the template's default
  EXPECT_EQ(tok->decode(app::make_codec(tok, {}, "chat", "Be brief.").encode_prompt(rows[1]), false),
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(rows[1].gold_solution, "Hello");
  // raw format: the question alone
  EXPECT_EQ(tok->decode(app::make_codec(tok, {}, "raw").encode_prompt(rows[0]), false), "And 2+3?");
}

TEST(PromptCodec, MeasuresPromptLengthsOfATask) {
  auto tok = smollm2();
  rl::PromptCodec c = app::make_codec(tok, {}, "raw");
  const std::string path = ::testing::TempDir() + "codec_lengths.jsonl";
  {
    std::ofstream f(path);
    f << R"({"prompt": "a b", "answer": 1})"
      << "\n"
      << R"({"prompt": "one two three four five six seven eight", "answer": 1, "id": "long"})"
      << "\n"
      << R"({"prompt": "c", "answer": 1})"
      << "\n";
  }
  auto t = tasks::make_task("dataset", {{"path", path}});
  app::PromptLengths m = app::measure_prompts(*t, tasks::Split::train, c, 4);
  EXPECT_EQ(m.measured, 3);
  EXPECT_EQ(m.longest_id, "long");
  EXPECT_EQ(m.longest, static_cast<int64_t>(c.encode_prompt(t->problem(tasks::Split::train, 1)).size()));
  EXPECT_GT(m.longest, 4);
  EXPECT_EQ(m.over, std::vector<uint64_t>{1});
  EXPECT_TRUE(app::measure_prompts(*t, tasks::Split::train, c, 0).over.empty());
  EXPECT_EQ(app::measure_prompts(*t, tasks::Split::eval, c, 4).measured, 0);
  EXPECT_EQ(app::measure_prompts(*tasks::make_task("arithmetic", {}), tasks::Split::train, c, 0, 5).measured, 5);
}
