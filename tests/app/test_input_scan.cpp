// Inputs checked before the first step (app/input_scan.h): a JSONL dataset against a preset's short context
// (model.context = 64 tokens, byte-level tokens): over-long training and held-out prompts skipped and counted (the
// filtered task never yields them) or refused naming task.long_prompts; rl.max_prompt_tokens as the training
// limit; a split with every row over, and a procedural stream with one, refused whatever the key; SFT rows without a
// gold solution refused before the first step, SFT rows cut at the context counted. Also the recipe checks of the
// same issue: task.long_prompts read and checked, rl.max_seqs below rl.group_size refused naming both.
#include <gtest/gtest.h>

#include <memory>
#include <set>
#include <string>

#include "common/scratch.h"
#include "temper/app/codec.h"
#include "temper/app/input_scan.h"
#include "temper/app/quickstart.h"
#include "temper/app/recipe.h"
#include "temper/app/run_config.h"
#include "temper/core/error.h"
#include "temper/rl/methods/registry.h"
#include "temper/tasks/filtered_task.h"

using namespace temper;
using namespace temper::app;
using temper::test::expect_error;

namespace {

std::string row(const std::string& id, size_t prompt_bytes, const std::string& extra = R"("answer": "4")") {
  return R"({"id": ")" + id + R"(", "prompt": ")" + std::string(prompt_bytes, 'x') + "\", " + extra + "}\n";
}

// Six training rows (t1 and t4 over a 64-token context: 100 and 80 bytes; t3 exactly at the limit of 63), three
// held-out rows (e2 over).
struct Fixture {
  std::string train, eval;
  Fixture() {
    train = test::write_scratch(
        "input_scan", "train.jsonl",
        row("t0", 10) + row("t1", 100) + row("t2", 20) + row("t3", 63) + row("t4", 80) + row("t5", 5));
    eval = test::write_scratch("input_scan", "eval.jsonl", row("e0", 7) + row("e1", 9) + row("e2", 70));
  }
};

RunConfig read(const std::string& toml) {
  Recipe r = Recipe::parse(toml, "t.toml");
  RunConfig c = read_run_config(r, rl::method_table());
  r.check_all_read();
  return c;
}

std::string recipe(const Fixture& f, const std::string& more = "") {
  return "[model]\ncontext = 64\n[task]\nname = \"dataset\"\n" + more + "[task.params]\npath = \"" + f.train +
         "\"\neval_path = \"" + f.eval + "\"\n[rl]\nsteps = 1\n";
}

rl::PromptCodec byte_codec() {
  auto tok = std::make_shared<text::Tokenizer>(byte_tokenizer());
  return make_codec(tok, {tok->eos_id()}, "raw");
}

// The options the run gives the scan (train_cmd.cpp).
ScanOptions options(const RunConfig& c) {
  ScanOptions o;
  o.context = c.model.context;
  o.max_prompt_tokens = c.rl.max_prompt_tokens;
  o.context_key = "model.context";
  o.policy = c.task.long_prompts;
  o.source = "t.toml";
  return o;
}

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(InputScan, SkipsOverLongPromptsOfBothSplitsCountsThemAndNeverYieldsThem) {
  Fixture f;
  const RunConfig c = read(recipe(f));
  EXPECT_EQ(c.task.long_prompts, "skip");  // the default
  const rl::PromptCodec codec = byte_codec();
  tasks::Problem xyz;
  xyz.prompt = "xyz";
  ASSERT_EQ(codec.encode_prompt(xyz).size(), 3u);  // a byte a token, nothing added
  std::shared_ptr<const tasks::Task> task = tasks::make_task(c.task.name, c.task.params);
  const ScanOutcome s = scan_prompts(task, codec, options(c));
  EXPECT_EQ(s.train.measured, 6);
  EXPECT_EQ(s.train.limit, 63);
  EXPECT_EQ(s.train.skipped, 2);
  EXPECT_EQ(s.train.longest, 63);
  EXPECT_EQ(s.train.longest_id, "t3");
  EXPECT_EQ(s.train.longest_over, 100);
  EXPECT_EQ(s.train.longest_over_id, "t1");
  EXPECT_EQ(s.eval.measured, 3);
  EXPECT_EQ(s.eval.skipped, 1);
  EXPECT_EQ(s.eval.longest, 9);
  ASSERT_NE(s.task, task);
  ASSERT_EQ(s.task->size(tasks::Split::train), 4);
  ASSERT_EQ(s.task->size(tasks::Split::eval), 2);
  std::set<std::string> ids;
  for (uint64_t i = 0; i < 4; ++i) {
    const tasks::Problem p = s.task->problem(tasks::Split::train, i);
    EXPECT_LE(codec.encode_prompt(p).size(), 63u) << p.id;
    ids.insert(p.id);
  }
  EXPECT_EQ(ids, (std::set<std::string>{"t0", "t2", "t3", "t5"}));
  for (uint64_t i = 0; i < 2; ++i) EXPECT_NE(s.task->problem(tasks::Split::eval, i).id, "e2");
  EXPECT_EQ(s.message,
            "t.toml: skipped 2 of 6 training prompts longer than the model's context leaves for a completion (63 "
            "tokens; the longest: t1, 100 tokens); skipped 1 of 3 held-out prompts longer than the model's context "
            "leaves for a completion (63 tokens; the longest: e2, 70 tokens); task.long_prompts = \"refuse\" stops "
            "instead");
}

TEST(InputScan, RefuseStopsNamingTheKeysThatFixIt) {
  Fixture f;
  const RunConfig c = read(recipe(f, "long_prompts = \"refuse\"\n"));
  ASSERT_EQ(c.task.long_prompts, "refuse");
  const std::string e =
      error_of([&] { scan_prompts(tasks::make_task(c.task.name, c.task.params), byte_codec(), options(c)); });
  EXPECT_NE(e.find("t.toml: 2 of 6 training prompts are longer than the model's context leaves for a completion (63 "
                   "tokens; the longest: t1, 100 tokens); task.long_prompts = \"skip\" leaves them out, or raise "
                   "model.context"),
            std::string::npos)
      << e;
  // Held-out prompts alone over: refused the same way, naming the split.
  ScanOptions o = options(c);
  o.train = false;
  expect_error([&] { scan_prompts(tasks::make_task(c.task.name, c.task.params), byte_codec(), o); },
               {"1 of 3 held-out prompts", "task.long_prompts = \"skip\"", "model.context"});
  // Nothing over: nothing said, the task as given.
  o.context = 200;
  std::shared_ptr<const tasks::Task> t = tasks::make_task(c.task.name, c.task.params);
  const ScanOutcome s = scan_prompts(t, byte_codec(), o);
  EXPECT_EQ(s.task, t);
  EXPECT_EQ(s.message, "");
}

TEST(InputScan, MaxPromptTokensIsTheTrainingLimitAndNamedAsTheFix) {
  Fixture f;
  const RunConfig c = read(recipe(f, "long_prompts = \"refuse\"\n") + "max_prompt_tokens = 15\n");
  std::shared_ptr<const tasks::Task> t = tasks::make_task(c.task.name, c.task.params);
  expect_error([&] { scan_prompts(t, byte_codec(), options(c)); },
               {"4 of 6 training prompts are longer than rl.max_prompt_tokens (15 tokens; the longest: t1, 100",
                "raise rl.max_prompt_tokens"});
  ScanOptions o = options(c);
  o.policy = "skip";
  o.context_key = "";  // a model from a path: its context is fixed
  const ScanOutcome s = scan_prompts(t, byte_codec(), o);
  EXPECT_EQ(s.train.skipped, 4);
  EXPECT_EQ(s.train.longest, 10);
  EXPECT_EQ(s.eval.limit, 63);  // held-out prompts: the context's limit
  EXPECT_EQ(s.eval.skipped, 1);
  // The held-out refusal with a fixed context says to shorten the rows.
  o.policy = "refuse";
  o.train = false;
  expect_error([&] { scan_prompts(t, byte_codec(), o); }, {"1 of 3 held-out prompts", "shorten those rows"});
}

TEST(InputScan, EveryRowOverAndAStreamWithOneOverAreRefusedWhateverTheKey) {
  const std::string p = test::write_scratch("input_scan", "long.jsonl", row("a", 70) + row("b", 90));
  ScanOptions o;
  o.context = 64;
  o.context_key = "model.context";
  o.source = "t.toml";
  o.eval = false;
  expect_error(
      [&] {
        scan_prompts(tasks::make_task("dataset", {{"path", p}}), byte_codec(), o);
      },
      {"t.toml: every one of the 2 training prompts is longer", "the longest: b, 90 tokens", "nothing would be left",
       "raise model.context"});
  // A procedural stream: its first 64 rows measured, one over refused (it cannot leave rows out).
  o.context = 8;  // "12+7*3=" and longer: over
  std::shared_ptr<const tasks::Task> a = tasks::make_task("arithmetic", {});
  const std::string e = error_of([&] { scan_prompts(a, byte_codec(), o); });
  EXPECT_NE(e.find("of the first 64 training prompts are longer"), std::string::npos) << e;
  EXPECT_NE(e.find("a procedural stream cannot leave rows out: raise model.context"), std::string::npos) << e;
  o.context = 4096;
  const ScanOutcome s = scan_prompts(a, byte_codec(), o);
  EXPECT_EQ(s.train.measured, 64);
  EXPECT_EQ(s.task, a);
}

TEST(InputScan, SftRowsWithoutAGoldSolutionAreRefusedAndRowsPastTheContextCounted) {
  const std::string p =
      test::write_scratch("input_scan", "sft.jsonl",
                          row("g0", 10, R"("solution": "short #### 1")") +
                              row("g1", 30, R"("solution": ")" + std::string(50, 'y') + "\"") + row("g2", 12));
  ScanOptions o;
  o.context = 64;
  o.source = "t.toml";
  o.sft = true;
  std::shared_ptr<const tasks::Task> t = tasks::make_task("dataset", {{"path", p}});
  const ScanOutcome s = scan_prompts(t, byte_codec(), o);
  EXPECT_EQ(s.train.cut, 1);  // g1: 30 + 50 + "\n#### 4" + the end token > 64
  EXPECT_EQ(s.train.longest_row_id, "g1");
  EXPECT_GT(s.train.longest_row, 80);
  EXPECT_EQ(s.task, t);  // cut, not skipped
  EXPECT_NE(s.message.find("SFT cuts 1 training rows whose prompt + solution pass the context (64 tokens; the longest: "
                           "g1"),
            std::string::npos)
      << s.message;
  const std::string q = test::write_scratch("input_scan", "noans.jsonl",
                                            R"({"prompt": "What is 1+1?"})"
                                            "\n"
                                            R"({"prompt": "What is 2+2?"})"
                                            "\n");
  expect_error(
      [&] {
        scan_prompts(tasks::make_task("dataset", {{"path", q}}), byte_codec(), o);
      },
      {"t.toml: sft: 2 of 2 training rows have no gold solution", "(the first: noans.jsonl:1)", "sft.steps = 0"});
  o.sft = false;  // RL alone (its reward may be a program that needs no answer)
  EXPECT_NO_THROW(scan_prompts(tasks::make_task("dataset", {{"path", q}}), byte_codec(), o));
}

TEST(InputScan, RecipeKeysLongPromptsAndMaxSeqsBelowTheGroupSize) {
  Fixture f;
  expect_error([&] { read(recipe(f, "long_prompts = \"truncate\"\n")); }, {"task.long_prompts", "truncate"});
  expect_error([] { read("[rl]\nsteps = 1\nmax_seqs = 2\ngroup_size = 4\n"); },
               {"rl.max_seqs = 2 is below rl.group_size = 4", "raise rl.max_seqs to 4 or more"});
  EXPECT_NO_THROW(read("[rl]\nsteps = 1\nmax_seqs = 4\ngroup_size = 4\n"));
  EXPECT_NO_THROW(read("[sft]\nsteps = 1\n[rl]\nmax_seqs = 2\ngroup_size = 4\n"));  // no RL: not checked
}
