// app::SideRun: the run directory of flow / control / tabular runs keeps temper train's promises: a new run
// refuses a used directory, a resume reads back the newest checkpoint's tensors and state, truncates
// metrics.jsonl to its step, refuses config changes unless allowed (recorded in history.jsonl), keep-last
// pruning, --stop-after, and report.html.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/scratch.h"
#include "temper/app/side_run.h"
#include "temper/core/error.h"
#include "temper/report/metrics_sink.h"

namespace temper::app {
namespace {
namespace fs = std::filesystem;

constexpr const char* kRecipe = "[run]\nkeep_last = 2\n\n[toy]\nlr = 0.5\nsteps = 4\n";

struct Toy {
  double lr = 0;
  int64_t steps = 0;
};

std::unique_ptr<SideRun> make(const SideRunOptions& o, Toy& toy) {
  return std::make_unique<SideRun>("temper toy train", o, kRecipe, [&toy](Recipe& r) {
    toy.lr = r.get_double("toy.lr", 1.0);
    toy.steps = r.get_int("toy.steps", 1);
  });
}

std::string slurp(const std::string& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string fresh_dir(const std::string& name) {
  const std::string dir = test::scratch_path("side_run", name);
  fs::remove_all(dir);
  return dir;
}

// Steps 1..3 with a checkpoint after each; a metrics row for step 4 written but never checkpointed.
void first_run(const std::string& dir) {
  Toy toy;
  SideRunOptions o;
  o.out = dir;
  auto run = make(o, toy);
  EXPECT_FALSE(run->open().has_value());
  run->start();
  EXPECT_DOUBLE_EQ(toy.lr, 0.5);
  for (int64_t step = 1; step <= 4; ++step) {
    run->metrics().write(step, "train", {{"loss", 1.0 / step}});
    if (step == 4) break;
    SideCheckpoint c;
    c.step = step;
    c.tensors = {{"w", {1.f * step, 2.f}}, {"adam.m", {0.25f}}};
    c.state = {{"cursor", step * 10}};
    run->save(c);
  }
  EXPECT_TRUE(fs::exists(run->finish()));
}

TEST(SideRun, NewRunResumeAndKeepLast) {
  const std::string dir = fresh_dir("resume");
  first_run(dir);
  EXPECT_FALSE(fs::exists(dir + "/checkpoints/step-1"));  // keep_last = 2
  EXPECT_TRUE(fs::exists(dir + "/checkpoints/step-3/checksums.sha256"));
  EXPECT_TRUE(fs::exists(dir + "/config.toml"));

  Toy toy;
  SideRunOptions again;
  again.out = dir;
  EXPECT_THROW(make(again, toy)->open(), Error);  // a new run on a used directory

  SideRunOptions o;
  o.resume = dir;
  auto run = make(o, toy);
  const auto c = run->open();
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->step, 3);
  EXPECT_EQ(c->tensor("w"), (std::vector<float>{3.f, 2.f}));
  EXPECT_EQ(c->tensor("adam.m"), (std::vector<float>{0.25f}));
  EXPECT_EQ(c->state["cursor"], 30);
  EXPECT_THROW(c->tensor("missing"), Error);
  run->start();
  const auto rows = report::read_metrics_jsonl(dir + "/metrics.jsonl");
  ASSERT_EQ(rows.size(), 3u);  // the row of step 4 (after the checkpoint) is gone
  EXPECT_EQ(rows.back().step, 3);
  EXPECT_NE(slurp(dir + "/history.jsonl").find("\"resume\""), std::string::npos);
}

TEST(SideRun, ResumeRefusesConfigChangesUnlessAllowed) {
  const std::string dir = fresh_dir("changes");
  first_run(dir);
  Toy toy;
  SideRunOptions o;
  o.resume = dir;
  o.sets = {"toy.lr=0.25"};
  try {
    make(o, toy)->open();
    FAIL() << "a changed config was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("toy.lr (0.5 -> 0.25)"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("--allow-changes"), std::string::npos) << e.what();
  }
  o.allow_changes = true;
  auto run = make(o, toy);
  ASSERT_TRUE(run->open().has_value());
  EXPECT_DOUBLE_EQ(toy.lr, 0.25);  // the structs end with the recipe's values, not the recorded ones
  run->start();
  EXPECT_NE(slurp(dir + "/history.jsonl").find("\"toy.lr\""), std::string::npos);
  EXPECT_NE(slurp(dir + "/config.toml").find("lr = 0.25"), std::string::npos);
}

TEST(SideRun, StopAfterUnknownKeysAndMissingDirectory) {
  Toy toy;
  SideRunOptions o;
  o.out = fresh_dir("stop");
  o.stop_after = 2;
  auto run = make(o, toy);
  EXPECT_FALSE(run->should_stop(1));
  EXPECT_TRUE(run->should_stop(2));

  SideRunOptions typo;
  typo.out = fresh_dir("typo");
  typo.sets = {"toy.lrr=1.0"};
  EXPECT_THROW(make(typo, toy), Error);

  SideRunOptions none;
  EXPECT_THROW(make(none, toy), Error);  // neither --out nor run.out
  SideRunOptions missing;
  missing.resume = fresh_dir("missing");
  EXPECT_THROW(make(missing, toy), Error);  // no config.toml to resume
}

}  // namespace
}  // namespace temper::app
