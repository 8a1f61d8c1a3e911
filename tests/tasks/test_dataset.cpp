// Dataset task: JSONL rows with prompt or messages, answers scored by the math checker, eval from eval_path or
// eval_fraction (disjoint, deterministic), and errors that name file:line, the field, the expected and the actual.
#include <gtest/gtest.h>

#include <fstream>
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
  expect_error(load("noanswer.jsonl", ok + R"({"prompt": "x"})" "\n"),
               {"noanswer.jsonl:2", "field 'answer'", "expected a string or number", "missing"});
  expect_error(load("nullanswer.jsonl", R"({"prompt": "x", "answer": null})"), {"nullanswer.jsonl:1", "'answer'", "got null"});
  expect_error(load("emptyanswer.jsonl", R"({"prompt": "x", "answer": " "})"), {"emptyanswer.jsonl:1", "non-empty answer"});
  expect_error(load("noprompt.jsonl", R"({"answer": "1"})"), {"noprompt.jsonl:1", "'prompt'", "'messages'", "neither"});
  expect_error(load("intprompt.jsonl", R"({"prompt": 5, "answer": "1"})"),
               {"intprompt.jsonl:1", "field 'prompt'", "expected a string", "got number"});
  expect_error(load("badmsg.jsonl", R"({"messages": [{"role": "user"}], "answer": "1"})"),
               {"badmsg.jsonl:1", "messages[0]", "field 'content'", "expected a string"});
  expect_error(load("msgnotlist.jsonl", R"({"messages": "hi", "answer": "1"})"),
               {"msgnotlist.jsonl:1", "'messages'", "list of {role, content}", "got string"});
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
}
