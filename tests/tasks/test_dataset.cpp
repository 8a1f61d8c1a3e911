// Dataset task: JSONL rows with prompt or messages, answers scored by the math checker, eval from eval_path or
// eval_fraction (disjoint, deterministic), and errors that name file:line, the field, the expected and the actual.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "common/scratch.h"
#include "temper/core/error.h"
#include "temper/core/log.h"
#include "temper/tasks/dataset.h"

using namespace temper;
using namespace temper::tasks;
using temper::test::expect_error;
using temper::test::scratch_path;

namespace {

std::string write_file(const std::string& name, const std::string& text) { return temper::test::write_scratch("dataset", name, text); }

const char* kRows =
    R"({"prompt": "What is 2+2?", "answer": "4", "difficulty": 1, "rubric": "exact"})"
    "\n"
    R"({"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Half of 3?"}], "answer": 1.5})"
    "\n"
    "\n"
    R"({"prompt": "Natalia sold 48 clips...", "answer": "She sold 48/2 = 24 in May.\n48+24 = 72\n#### 72", "id": 9})"
    "\n"
    R"({"prompt": "Capital of France?", "answer": "Paris", "teacher_response": "It is Paris.", "id": "geo-1", "extra": [1],)"
    R"( "rubric": ["Names the city.", "One sentence."]})"
    "\n";

}  // namespace

TEST(Dataset, LoadsRows) {
  std::string path = write_file("rows.jsonl", kRows);
  auto rows = load_jsonl_problems(path);
  ASSERT_EQ(rows.size(), 4u);
  EXPECT_EQ(rows[0].prompt, "What is 2+2?");
  EXPECT_EQ(rows[0].answer, "4");
  EXPECT_EQ(rows[0].difficulty, 1);
  EXPECT_EQ(rows[0].rubric, "exact");
  EXPECT_EQ(rows[0].id, "rows.jsonl:1");
  EXPECT_EQ(rows[0].gold_solution, "#### 4");
  EXPECT_TRUE(rows[0].messages.empty());
  // Messages only: prompt is the last user message; a numeric answer becomes its text.
  ASSERT_EQ(rows[1].messages.size(), 2u);
  EXPECT_EQ(rows[1].messages[0].role, "system");
  EXPECT_EQ(rows[1].messages[1].content, "Half of 3?");
  EXPECT_EQ(rows[1].prompt, "Half of 3?");
  EXPECT_EQ(rows[1].answer, "1.5");
  EXPECT_EQ(rows[1].id, "rows.jsonl:2");
  // GSM8K layout: the worked answer becomes the teacher response, the final number the answer. Line 4 (blank 3).
  EXPECT_EQ(rows[2].answer, "72");
  EXPECT_EQ(rows[2].teacher_response, "She sold 48/2 = 24 in May.\n48+24 = 72\n#### 72");
  EXPECT_EQ(rows[2].gold_solution, rows[2].teacher_response);
  EXPECT_EQ(rows[2].id, "9");
  EXPECT_EQ(rows[3].id, "geo-1");
  EXPECT_EQ(rows[3].gold_solution, "It is Paris.\n#### Paris");
  EXPECT_EQ(rows[3].rubric, "1. Names the city.\n2. One sentence.");  // a list of criteria, numbered one per line
}

TEST(Dataset, VerifiesWithTheMathChecker) {
  std::string path = write_file("verify.jsonl", kRows);
  auto t = make_task("dataset", {{"path", path}});
  EXPECT_EQ(t->name(), "dataset");
  EXPECT_EQ(t->size(Split::train), 4);
  EXPECT_EQ(t->size(Split::eval), 0);
  Problem half = t->problem(Split::train, 1);
  EXPECT_EQ(t->verify(half, "3/2 = \\frac{3}{2}\n#### 1.5").reward, 1.0);
  EXPECT_EQ(t->verify(half, "So the answer is \\boxed{\\frac{3}{2}}.").reward, 1.0);
  EXPECT_EQ(t->verify(half, "The answer is 3/2.").reward, 1.0);
  Verdict wrong = t->verify(half, "#### 2");
  EXPECT_EQ(wrong.reward, 0.0);
  EXPECT_EQ(wrong.extracted, "2");
  Verdict none = t->verify(half, "1.5");  // no stated final answer
  EXPECT_EQ(none.reward, 0.0);
  EXPECT_FALSE(none.extracted.has_value());
  Problem gsm = t->problem(Split::train, 2);
  EXPECT_EQ(t->verify(gsm, gsm.gold_solution).reward, 1.0);
  EXPECT_EQ(t->verify(gsm, "#### 72.00").reward, 1.0);
  EXPECT_EQ(t->verify(gsm, "#### 73").reward, 0.0);
  Problem paris = t->problem(Split::train, 3);
  EXPECT_EQ(t->verify(paris, "#### paris.").reward, 1.0);
  EXPECT_EQ(t->verify(paris, "#### Lyon").reward, 0.0);
  for (int i = 0; i < 4; ++i) {
    Problem p = t->problem(Split::train, i);
    EXPECT_EQ(t->verify(p, p.gold_solution).reward, 1.0) << p.id;
  }
  expect_error([&] { t->problem(Split::train, 4); }, {"index 4 out of range", "train", "4 problems"});
  expect_error([&] { t->problem(Split::eval, 0); }, {"out of range", "eval"});
}

TEST(Dataset, EvalFractionSplitsDisjointAndDeterministic) {
  std::string text;
  for (int i = 0; i < 1000; ++i) text += R"({"prompt": "q)" + std::to_string(i) + R"(", "answer": ")" + std::to_string(i) + "\"}\n";
  // Duplicated prompts must land in the same split.
  for (int i = 0; i < 50; ++i) text += R"({"prompt": "q)" + std::to_string(i) + R"(", "answer": ")" + std::to_string(i) + "\"}\n";
  std::string path = write_file("many.jsonl", text);
  auto a = make_task("dataset", {{"path", path}, {"eval_fraction", "0.2"}});
  auto b = make_task("dataset", {{"path", path}, {"eval_fraction", "0.2"}});
  EXPECT_EQ(a->size(Split::train) + a->size(Split::eval), 1050);
  EXPECT_NEAR(a->size(Split::eval) / 1050.0, 0.2, 0.04);
  std::set<std::string> train, eval;
  for (int64_t i = 0; i < a->size(Split::train); ++i) train.insert(a->problem(Split::train, i).prompt);
  for (int64_t i = 0; i < a->size(Split::eval); ++i) {
    eval.insert(a->problem(Split::eval, i).prompt);
    EXPECT_EQ(a->problem(Split::eval, i).id, b->problem(Split::eval, i).id);
  }
  EXPECT_EQ(train.size() + eval.size(), 1000u);
  for (const auto& e : eval) EXPECT_EQ(train.count(e), 0u) << e;
}

TEST(Dataset, AMixtureOfFiniteMembersVisitsEachProblemOncePerPass) {
  std::string text;
  for (int i = 0; i < 30; ++i) text += R"({"prompt": "m)" + std::to_string(i) + R"(", "answer": ")" + std::to_string(i) + "\"}\n";
  std::string path = write_file("mix.jsonl", text);
  auto d = make_task("dataset", {{"path", path}});
  auto m = make_task("mixture", {{"tasks", "dataset"}, {"dataset.path", path}});
  ASSERT_EQ(m->size(Split::train), 30);
  std::set<std::string> seen;
  for (int64_t i = 0; i < 30; ++i) {
    Problem p = m->problem(Split::train, static_cast<uint64_t>(i));
    EXPECT_EQ(p.id, "dataset:" + d->problem(Split::train, static_cast<uint64_t>(i)).id);
    seen.insert(p.prompt);
    EXPECT_EQ(m->verify(p, "#### " + p.answer).reward, 1.0);
  }
  EXPECT_EQ(seen.size(), 30u);
  EXPECT_EQ(m->problem(Split::train, 31).id, m->problem(Split::train, 1).id);  // the next pass
}

TEST(Dataset, EvalPathAndOverlapWarning) {
  std::string tr = write_file("tr.jsonl", R"({"prompt": "a", "answer": "1"})" "\n" R"({"prompt": "b", "answer": "2"})" "\n");
  std::string ev = write_file("ev.jsonl", R"({"prompt": "b", "answer": "2"})" "\n");
  std::vector<std::string> warns;
  log_set_sink([&](LogLevel l, std::string_view m) {
    if (l == LogLevel::warn) warns.emplace_back(m);
  });
  auto t = make_task("dataset", {{"path", tr}, {"eval_path", ev}});
  log_set_sink(nullptr);
  EXPECT_EQ(t->size(Split::train), 2);
  EXPECT_EQ(t->size(Split::eval), 1);
  EXPECT_EQ(t->problem(Split::eval, 0).id, "ev.jsonl:1");
  ASSERT_EQ(warns.size(), 1u);
  EXPECT_NE(warns[0].find("1 prompts"), std::string::npos) << warns[0];
}

TEST(Dataset, EvaluatingTheTrainingFileItselfIsNotAnOverlap) {  // temper eval --param path=FILE
  std::string tr = write_file("all.jsonl", R"({"prompt": "a", "answer": "1"})"
                                           "\n"
                                           R"({"prompt": "b", "answer": "2"})"
                                           "\n");
  std::vector<std::string> warns;
  log_set_sink([&](LogLevel l, std::string_view m) {
    if (l == LogLevel::warn) warns.emplace_back(m);
  });
  auto t = make_task("dataset", {{"path", tr}, {"eval_path", tr}});
  log_set_sink(nullptr);
  EXPECT_EQ(t->size(Split::eval), 2);
  EXPECT_EQ(t->problem(Split::eval, 1).id, "all.jsonl:2");
  EXPECT_TRUE(warns.empty()) << warns[0];
}

TEST(Dataset, ErrorsNameFileLineFieldExpectedActual) {
  auto load = [](const std::string& name, const std::string& text) {
    std::string p = write_file(name, text);
    return [p] { load_jsonl_problems(p); };
  };
  const std::string ok = R"({"prompt": "x", "answer": "1"})" "\n";
  expect_error(load("badjson.jsonl", ok + ok + "{\"prompt\": \"x\", \n"), {"badjson.jsonl:3", "not valid JSON"});
  expect_error(load("boolanswer.jsonl", ok + R"({"prompt": "x", "answer": true})"
                                             "\n"),
               {"boolanswer.jsonl:2", "field 'answer'", "expected a string or number", "got boolean"});
  expect_error(load("emptyanswer.jsonl", R"({"prompt": "x", "answer": " "})"), {"emptyanswer.jsonl:1", "non-empty answer"});
  expect_error(load("noprompt.jsonl", R"({"answer": "1"})"), {"noprompt.jsonl:1", "'prompt'", "'messages'", "neither"});
  expect_error(load("intprompt.jsonl", R"({"prompt": 5, "answer": "1"})"),
               {"intprompt.jsonl:1", "field 'prompt'", "expected a string or a list of {role, content}", "got number"});
  expect_error(load("badmsg.jsonl", R"({"messages": [{"role": "user"}], "answer": "1"})"),
               {"badmsg.jsonl:1", "messages[0]", "field 'content'", "expected a string", "missing"});
  expect_error(load("msgnotlist.jsonl", R"({"messages": "hi", "answer": "1"})"),
               {"msgnotlist.jsonl:1", "'messages'", "list of {role, content}", "got string"});
  expect_error(load("msgempty.jsonl", R"({"messages": [], "answer": "1"})"),
               {"msgempty.jsonl:1", "'messages'", "non-empty list"});
  expect_error(load("msgturn.jsonl", ok + R"({"messages": [{"role": "user", "content": "a"}, "b"]})"),
               {"msgturn.jsonl:2", "messages[1]", "an object {role, content}", "got string"});
  expect_error(load("msgcontent.jsonl", R"({"messages": [{"role": "user", "content": ["a"]}]})"),
               {"msgcontent.jsonl:1", "messages[0]", "'content'", "expected a string", "got array"});
  expect_error(
      load("msgrole.jsonl", R"({"messages": [{"role": "bot", "content": "a"}]})"),
      {"msgrole.jsonl:1", "messages[0]", "'role'", "\"system\", \"user\", \"assistant\" or \"tool\"", "got \"bot\""});
  expect_error(load("msgsystem.jsonl",
                    R"({"messages": [{"role": "user", "content": "a"}, {"role": "system", "content": "b"}]})"),
               {"msgsystem.jsonl:1", "messages[1]", "system turn must come first"});
  expect_error(load("msgnouser.jsonl",
                    R"({"messages": [{"role": "system", "content": "a"}, {"role": "assistant", "content": "b"}]})"),
               {"msgnouser.jsonl:1", "'messages'", "expected a user turn", "got none"});
  expect_error(load("msgonlygold.jsonl", R"({"messages": [{"role": "assistant", "content": "b"}]})"),
               {"msgonlygold.jsonl:1", "expected a user turn", "only the final assistant turn"});
  expect_error(load("msgemptygold.jsonl",
                    R"({"messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": " "}]})"),
               {"msgemptygold.jsonl:1", "messages[1]", "final assistant turn", "empty"});
  expect_error(
      load(
          "twogolds.jsonl",
          R"({"messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}], "solution": "c"})"),
      {"twogolds.jsonl:1", "two gold completions", "final assistant turn of 'messages'", "'solution'"});
  expect_error(load("solcompl.jsonl", R"({"prompt": "a", "solution": "b", "completion": "c"})"),
               {"solcompl.jsonl:1", "two gold completions", "'solution' and 'completion'"});
  expect_error(load("badsolution.jsonl", R"({"prompt": "a", "solution": 5})"),
               {"badsolution.jsonl:1", "field 'solution'", "a string or a list of one", "got number"});
  expect_error(load("emptycompletion.jsonl", R"({"prompt": "a", "completion": ""})"),
               {"emptycompletion.jsonl:1", "field 'completion'", "non-empty completion"});
  expect_error(load("usercompletion.jsonl", R"({"prompt": "a", "completion": [{"role": "user", "content": "b"}]})"),
               {"usercompletion.jsonl:1", "completion[0]", "expected \"assistant\"", "got \"user\""});
  expect_error(
      load("promptandmsgs.jsonl",
           R"({"prompt": [{"role": "user", "content": "a"}], "messages": [{"role": "user", "content": "a"}]})"),
      {"promptandmsgs.jsonl:1", "'prompt' is a list of turns and 'messages'", "one of them"});
  expect_error(load("promptturn.jsonl", R"({"prompt": [{"role": "user", "content": 3}]})"),
               {"promptturn.jsonl:1", "prompt[0]", "'content'", "got number"});
  expect_error(load("baddiff.jsonl", R"({"prompt": "x", "answer": "1", "difficulty": "hard"})"),
               {"baddiff.jsonl:1", "'difficulty'", "an integer", "got string"});
  expect_error(load("badid.jsonl", R"({"prompt": "x", "answer": "1", "id": [1]})"), {"badid.jsonl:1", "'id'", "got array"});
  expect_error(load("notobj.jsonl", "[1, 2]\n"), {"notobj.jsonl:1", "expected a JSON object", "got array"});
  expect_error(load("badrubric.jsonl", R"({"prompt": "x", "answer": "1", "rubric": ["ok", 3]})"),
               {"badrubric.jsonl:1", "'rubric[1]'", "criterion", "got number"});
  expect_error(load("emptyrubric.jsonl", R"({"prompt": "x", "answer": "1", "rubric": []})"),
               {"emptyrubric.jsonl:1", "'rubric'", "list of strings"});
  expect_error(load("empty.jsonl", "\n\n"), {"empty.jsonl", "no rows"});
  expect_error([] { load_jsonl_problems("/nonexistent/x.jsonl"); }, {"/nonexistent/x.jsonl", "cannot open"});
}

TEST(Dataset, ParameterErrors) {
  std::string path = write_file("params.jsonl", R"({"prompt": "x", "answer": "1"})");
  expect_error([] { make_task("dataset", {}); }, {"'path' is required", "JSONL"});
  expect_error([&] { make_task("dataset", {{"path", path}, {"eval_fraction", "1.5"}}); },
               {"'eval_fraction'", "a number in [0", "got '1.5'"});
  expect_error([&] { make_task("dataset", {{"path", path}, {"eval_fraction", "0.1"}, {"eval_path", path}}); },
               {"not both"});
  expect_error([&] { make_task("dataset", {{"path", path}, {"shuffle", "1"}}); }, {"unknown parameter 'shuffle'", "eval_path"});
  // A directory (it would read as "no rows") is refused naming the parameter, for path and eval_path.
  const std::string dir = std::filesystem::path(path).parent_path().string();
  expect_error([&] { make_task("dataset", {{"path", dir}}); },
               {"task 'dataset': parameter 'path' = '" + dir +
                "': is a directory; expected a JSONL file (one JSON object per line)"});
  expect_error([&] { make_task("dataset", {{"path", path}, {"eval_path", dir + "/"}}); },
               {"parameter 'eval_path' = '" + dir + "/': is a directory", "expected a JSONL file"});
  EXPECT_EQ(make_task("dataset", {{"path", path}, {"eval_path", path}})->size(Split::eval), 1);
}

// TRL's formats: conversational (messages with system / user / assistant turns, the final assistant turn the gold
// completion and not part of the prompt), prompt-completion (string or conversational), a `solution` column.
TEST(Dataset, ChatRowsAndGoldCompletions) {
  std::string path = write_file(
      "chat.jsonl",
      R"({"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "2+2?"}, {"role": "assistant", "content": "2+2 = 4"}], "answer": "4"})"
      "\n"
      R"({"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello!"}, {"role": "user", "content": "3*3?"}, {"role": "assistant", "content": "It is \\boxed{9}."}], "answer": 9})"
      "\n"
      R"({"prompt": "Half of 8?", "completion": "Half of 8 is 4.", "answer": "4"})"
      "\n"
      R"({"prompt": [{"role": "user", "content": "Capital of Peru?"}], "completion": [{"role": "assistant", "content": "Lima."}]})"
      "\n"
      R"({"prompt": "5-2?", "solution": "5-2 = 3\n#### 3", "answer": "3", "teacher_response": "Three.\n#### 3"})"
      "\n"
      R"({"prompt": "Say hi.", "solution": "hi"})"
      "\n"
      R"({"prompt": "7+1?", "solution": "The answer is 8.", "answer": "8"})"
      "\n"
      R"({"messages": [{"role": "user", "content": "1+1?"}, {"role": "assistant", "content": "2"}, {"role": "user", "content": "And 2+2?"}]})"
      "\n");
  auto rows = load_jsonl_problems(path);
  ASSERT_EQ(rows.size(), 8u);
  // system + user + assistant: the assistant turn is the gold (closed with the answer the checker needs), not asked
  ASSERT_EQ(rows[0].messages.size(), 2u);
  EXPECT_EQ(rows[0].messages[0].role, "system");
  EXPECT_EQ(rows[0].messages[1].role, "user");
  EXPECT_EQ(rows[0].prompt, "2+2?");
  EXPECT_EQ(rows[0].gold_solution, "2+2 = 4\n#### 4");
  EXPECT_EQ(rows[0].teacher_response, "2+2 = 4");
  // multi-turn: the history stays in the prompt; a gold that states its answer (\boxed) is not closed again
  ASSERT_EQ(rows[1].messages.size(), 3u);
  EXPECT_EQ(rows[1].messages[1].content, "Hello!");
  EXPECT_EQ(rows[1].messages[2].content, "3*3?");
  EXPECT_EQ(rows[1].prompt, "3*3?");
  EXPECT_EQ(rows[1].gold_solution, "It is \\boxed{9}.");
  EXPECT_EQ(rows[1].answer, "9");
  // prompt-completion, as text and conversational (no answer: the completion alone)
  EXPECT_EQ(rows[2].gold_solution, "Half of 8 is 4.\n#### 4");
  EXPECT_TRUE(rows[2].messages.empty());
  ASSERT_EQ(rows[3].messages.size(), 1u);
  EXPECT_EQ(rows[3].prompt, "Capital of Peru?");
  EXPECT_EQ(rows[3].gold_solution, "Lima.");
  EXPECT_EQ(rows[3].answer, "");
  // `solution` is SFT's target; teacher_response stays the teacher's
  EXPECT_EQ(rows[4].gold_solution, "5-2 = 3\n#### 3");
  EXPECT_EQ(rows[4].teacher_response, "Three.\n#### 3");
  EXPECT_EQ(rows[5].gold_solution, "hi");
  EXPECT_EQ(rows[5].answer, "");
  EXPECT_EQ(rows[6].gold_solution, "The answer is 8.");
  // a conversation that ends with a user turn: no gold completion; no answer: an empty gold (SFT refuses it)
  ASSERT_EQ(rows[7].messages.size(), 3u);
  EXPECT_EQ(rows[7].prompt, "And 2+2?");
  EXPECT_EQ(rows[7].gold_solution, "");

  auto t = make_task("dataset", {{"path", path}});
  for (int i : {0, 1, 2, 4, 6}) {
    Problem p = t->problem(Split::train, static_cast<uint64_t>(i));
    EXPECT_EQ(t->verify(p, p.gold_solution).reward, 1.0) << p.id;
  }
  // rows without an answer score 0 with the builtin checker, whatever the completion
  Problem peru = t->problem(Split::train, 3);
  EXPECT_EQ(t->verify(peru, "#### ").reward, 0.0);
  EXPECT_EQ(t->verify(peru, "#### Lima").reward, 0.0);
  EXPECT_FALSE(t->verify(peru, "#### Lima").correct);
}

TEST(Dataset, RowsWithoutAnswersAreFoundForRunsThatScoreWithTheBuiltinChecker) {
  std::string path = write_file("answerless.jsonl", R"({"prompt": "a", "answer": "1"})"
                                                    "\n"
                                                    R"({"prompt": "b", "solution": "B"})"
                                                    "\n"
                                                    R"({"prompt": "c", "answer": null})"
                                                    "\n");
  auto t = make_task("dataset", {{"path", path}});
  Answerless a = find_answerless(*t, Split::train);
  EXPECT_EQ(a.count, 2);
  EXPECT_EQ(a.first_id, "answerless.jsonl:2");
  EXPECT_EQ(find_answerless(*t, Split::eval).count, 0);
  expect_error([&] { require_answers(*t, "train"); },
               {"train: 2 train problem(s)", "task 'dataset'", "answerless.jsonl:2", "'answer'", "[[reward]]"});
  require_answers(*t, "temper eval", {Split::eval});  // the eval split has no rows
  std::string ok = write_file("answered.jsonl", R"({"prompt": "a", "answer": "1"})");
  require_answers(*make_task("dataset", {{"path", ok}}), "train");  // no throw
  require_answers(*make_task("arithmetic", {}), "train");           // a procedural stream: nothing to check
  auto m = make_task("mixture", {{"tasks", "dataset"}, {"dataset.path", path}});
  EXPECT_EQ(find_answerless(*m, Split::train).first_id, "dataset:answerless.jsonl:2");
}

TEST(Dataset, ProblemsCarryTheirRowForRewardPrograms) {
  std::string path =
      write_file("columns.jsonl",
                 R"({"prompt": "a", "answer": "1", "source": "web", "tests": ["assert f(1) == 2"], "meta": {"k": 3}})"
                 "\n"
                 R"({"messages": [{"role": "user", "content": "b"}, {"role": "assistant", "content": "B"}]})"
                 "\n");
  auto t = make_task("dataset", {{"path", path}});
  Problem p = t->problem(Split::train, 0);
  ASSERT_TRUE(p.row);
  nlohmann::json row = nlohmann::json::parse(*p.row);
  EXPECT_EQ(row["source"], "web");
  EXPECT_EQ(row["tests"][0], "assert f(1) == 2");
  EXPECT_EQ(row["meta"]["k"], 3);
  EXPECT_EQ(row["answer"], "1");
  EXPECT_EQ(p.row->find('\n'), std::string::npos);  // one line, as a JSON lines protocol needs
  Problem q = t->problem(Split::train, 1);          // the row as given: the gold assistant turn is in it
  ASSERT_TRUE(q.row);
  EXPECT_EQ(nlohmann::json::parse(*q.row)["messages"].size(), 2u);
  EXPECT_EQ(q.messages.size(), 1u);
  EXPECT_FALSE(make_task("arithmetic", {})->problem(Split::train, 0).row);  // procedural: none
}

TEST(Dataset, TheRecipeReadmeExampleRowsLoadAndTheirGoldsScore) {  // recipes/README.md, "Your own data"
  std::string path = write_file(
      "readme.jsonl",
      R"({"prompt": "Tom has 3 apples and buys 4 more. How many apples does he have?", "answer": "7"})"
      "\n"
      R"({"prompt": "A pen costs $2. How much do 5 pens cost?", "answer": "10", "solution": "5 x 2 = 10 dollars.\n#### 10"})"
      "\n"
      R"({"messages": [{"role": "system", "content": "Answer with #### N."}, {"role": "user", "content": "What is 6 x 7?"}, {"role": "assistant", "content": "6 x 7 = 42\n#### 42"}], "answer": 42})"
      "\n"
      R"({"prompt": [{"role": "user", "content": "What is 15% of 80?"}], "completion": [{"role": "assistant", "content": "0.15 x 80 = 12, so the answer is 12."}], "answer": "12", "source": "handwritten"})"
      "\n");
  auto t = make_task("dataset", {{"path", path}});
  const std::vector<std::string> golds = {"#### 7", "5 x 2 = 10 dollars.\n#### 10", "6 x 7 = 42\n#### 42",
                                          "0.15 x 80 = 12, so the answer is 12."};
  for (int i = 0; i < 4; ++i) {
    Problem p = t->problem(Split::train, static_cast<uint64_t>(i));
    EXPECT_EQ(p.gold_solution, golds[static_cast<size_t>(i)]);
    EXPECT_EQ(t->verify(p, p.gold_solution).reward, 1.0) << p.id;
  }
  EXPECT_EQ(find_answerless(*t, Split::train).count, 0);
}
