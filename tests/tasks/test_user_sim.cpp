// Task user_sim: JSONL conversations (history, context as text or messages, the real reply, optional
// reasoning and user) become problems with the simulator's prompt and gold "<reasoning>..</reasoning>\n[HUMAN]:
// reply"; the completion parser counts blocks and tags; the similarity verifier is word-level F1; bad rows
// are named by file:line and field.
#include <gtest/gtest.h>

#include <fstream>

#include "common/scratch.h"
#include "temper/core/error.h"
#include "temper/tasks/user_sim.h"

using namespace temper;
using namespace temper::tasks;
using temper::test::expect_error;
using temper::test::scratch_path;

namespace {

std::string write_file(const std::string& name, const std::string& text) { return temper::test::write_scratch("user_sim", name, text); }

const char* kRows =
    R"({"id": "c1", "user": "u1", "history": ["lol pizza!", "lol late\nagain!"], "context": [{"role": "assistant", "content": "How was it?"}], "reply": "lol it was fun!", "reasoning": "i had fun"})"
    "\n"
    R"({"user": 7, "history": [], "context": "ASSISTANT: Hi.\nUSER: hello\nASSISTANT: What now?", "reply": "  Nothing.  "})"
    "\n";

}  // namespace

TEST(UserSim, LoadsConversations) {
  UserSimTask t(UserSimConfig{{write_file("rows.jsonl", kRows), "", 0}});
  ASSERT_EQ(t.size(Split::train), 2);
  Problem a = t.problem(Split::train, 0), b = t.problem(Split::train, 1);
  EXPECT_EQ(a.id, "c1");
  EXPECT_EQ(a.user, "u1");
  EXPECT_EQ(a.history, (std::vector<std::string>{"lol pizza!", "lol late again!"}));
  EXPECT_EQ(a.context, "ASSISTANT: How was it?");
  EXPECT_EQ(a.answer, "lol it was fun!");
  EXPECT_EQ(a.gold_solution, "<reasoning>i had fun</reasoning>\n[HUMAN]: lol it was fun!");
  EXPECT_EQ(a.prompt, "Earlier turns of this user:\n- lol pizza!\n- lol late again!\nConversation:\nASSISTANT: How was it?\nThe user's next turn:\n");
  EXPECT_EQ(b.id, "rows.jsonl:2");
  EXPECT_EQ(b.user, "7");
  EXPECT_EQ(b.answer, "Nothing.");
  EXPECT_EQ(b.gold_solution, "[HUMAN]: Nothing.");
  EXPECT_NE(b.prompt.find("(none)"), std::string::npos);
  EXPECT_EQ(t.size(Split::eval), 0);
  // The gold solution scores full marks; the parser reads it back.
  Verdict v = t.verify(a, a.gold_solution);
  EXPECT_TRUE(v.correct);
  EXPECT_EQ(v.reward, 1);
  EXPECT_EQ(*v.extracted, "lol it was fun!");
}

TEST(UserSim, ParsesCompletions) {
  SimReply r = parse_sim_reply("<reasoning>i had fun</reasoning>\n[HUMAN]: lol it was fun!");
  EXPECT_EQ(r.reasoning_blocks, 1);
  EXPECT_EQ(r.human_tags, 1);
  EXPECT_EQ(r.stray_tags, 0);
  EXPECT_TRUE(r.reasoning_has_alpha);
  EXPECT_FALSE(r.reasoning_after_reply);
  EXPECT_EQ(r.reasoning, "i had fun");
  EXPECT_EQ(r.reply, "lol it was fun!");
  r = parse_sim_reply("<reasoning>1 2</reasoning><reasoning>x</reasoning> [HUMAN]: a [HUMAN]: b </reasoning>");
  EXPECT_EQ(r.reasoning_blocks, 2);
  EXPECT_EQ(r.stray_tags, 1);
  EXPECT_EQ(r.human_tags, 2);
  EXPECT_TRUE(r.reasoning_after_reply);
  EXPECT_TRUE(r.reasoning_has_alpha);  // the second block
  EXPECT_EQ(r.reasoning, "1 2");
  EXPECT_EQ(r.reply, "b </reasoning>");
  r = parse_sim_reply("<reasoning>never closed [HUMAN]: hi");
  EXPECT_EQ(r.reasoning_blocks, 0);
  EXPECT_EQ(r.stray_tags, 1);
  EXPECT_FALSE(r.reasoning_has_alpha);
  EXPECT_EQ(r.reply, "hi");
  r = parse_sim_reply("  just text ");
  EXPECT_EQ(r.human_tags, 0);
  EXPECT_EQ(r.reply, "just text");
  EXPECT_EQ(turn_words("Great, thanks!! It's 5"), (std::vector<std::string>{"great", "thanks", "it's", "5"}));
  EXPECT_EQ(word_count("  a  b\tc\n"), 3);
}

TEST(UserSim, VerifierIsWordF1) {
  UserSimTask t(UserSimConfig{{write_file("rows2.jsonl", kRows), "", 0}});
  Problem a = t.problem(Split::train, 0);  // real: lol it was fun! (4 words)
  Verdict v = t.verify(a, "[HUMAN]: it was FUN, really");  // 3 common of 4 generated, 4 real: P 3/4, R 3/4
  EXPECT_NEAR(v.reward, 0.75, 1e-12);
  EXPECT_FALSE(v.correct);
  EXPECT_EQ(t.verify(a, "[HUMAN]: nope").reward, 0);
  EXPECT_TRUE(t.verify(a, "[HUMAN]: LOL it was fun").correct);  // case and punctuation folded
  EXPECT_FALSE(t.verify(a, "<reasoning>x</reasoning>").extracted.has_value());
}

TEST(UserSim, SplitsAndErrors) {
  std::string rows;
  for (int i = 0; i < 200; ++i)
    rows += R"({"history": ["h"], "context": "ASSISTANT: q)" + std::to_string(i) + R"(", "reply": "r"})" "\n";
  UserSimTask t(UserSimConfig::from_params({{"path", write_file("many.jsonl", rows)}, {"eval_fraction", "0.2"}}));
  EXPECT_EQ(t.size(Split::train) + t.size(Split::eval), 200);
  EXPECT_GT(t.size(Split::eval), 20);
  EXPECT_LT(t.size(Split::eval), 60);
  std::string bad = write_file("bad.jsonl", R"({"history": ["a", 3], "context": "x", "reply": "y"})" "\n");
  expect_error([&] { load_user_sim_jsonl(bad); }, {"bad.jsonl:1", "history[1]", "a string", "number"});
  bad = write_file("bad2.jsonl", "\n" R"({"history": [], "context": "x", "reply": "  "})" "\n");
  expect_error([&] { load_user_sim_jsonl(bad); }, {"bad2.jsonl:2", "'reply'", "non-empty"});
  bad = write_file("bad3.jsonl", R"({"history": [], "context": [{"role": "user"}], "reply": "y"})" "\n");
  expect_error([&] { load_user_sim_jsonl(bad); }, {"bad3.jsonl:1", "context[0]", "{role: string, content: string}"});
  bad = write_file("bad4.jsonl", R"({"context": "x", "reply": "y"})" "\n");
  expect_error([&] { load_user_sim_jsonl(bad); }, {"bad4.jsonl:1", "'history'", "missing"});
  expect_error([&] { UserSimConfig::from_params({{"path", "p"}, {"shuffle", "1"}}); }, {"shuffle"});
  expect_error([&] { load_user_sim_jsonl("/nonexistent/u.jsonl"); }, {"/nonexistent/u.jsonl", "cannot open"});
}
