// Reward programs (reward/program_reward.h): the JSON-lines protocol with Python workers, and every failure
// (a hang, a crash, a malformed or short reply, a slow or failed start) costing samples, never the run.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

#include "temper/core/error.h"
#include "temper/reward/child_process.h"
#include "temper/reward/program_reward.h"

namespace temper::reward {
namespace {

namespace fs = std::filesystem;

const std::string kWorker = std::string(TEMPER_TEST_SOURCE_DIR) + "/reward/workers/fake_worker.py";

ProgramOptions options(const std::string& mode, int64_t workers = 1, double timeout_s = 10) {
  ProgramOptions o;
  o.name = "fake";
  o.command = {"python3", kWorker, mode};
  o.workers = workers;
  o.timeout_s = timeout_s;
  o.start_timeout_s = 20;
  return o;
}

std::vector<std::string> items(int n) {
  std::vector<std::string> out;
  for (int i = 0; i < n; ++i)
    out.push_back("{\"id\":\"" + std::to_string(i) + "\",\"completion\":\"" + std::string(static_cast<size_t>(i), 'x') +
                  "\"}");
  return out;
}

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

TEST(ProgramReward, ScoresEveryItemInOrderAcrossWorkers) {
  for (int64_t workers : {1, 3}) {
    ProgramReward p(options("ok", workers));
    p.start();
    std::vector<ProgramScore> got = p.score(items(10), 7);
    ASSERT_EQ(got.size(), 10u);
    for (int i = 0; i < 10; ++i) {
      EXPECT_TRUE(got[static_cast<size_t>(i)].ok);
      EXPECT_DOUBLE_EQ(got[static_cast<size_t>(i)].reward, i / 10.0) << "workers " << workers;
      ASSERT_EQ(got[static_cast<size_t>(i)].components.size(), 1u);
      EXPECT_EQ(got[static_cast<size_t>(i)].components[0].first, "len");
      EXPECT_DOUBLE_EQ(got[static_cast<size_t>(i)].components[0].second, i);
      EXPECT_EQ(got[static_cast<size_t>(i)].info, "step 7 id " + std::to_string(i));
    }
    EXPECT_EQ(p.failures(), 0);
  }
}

TEST(ProgramReward, AHungWorkerIsKilledWithinItsTimeoutAndRestarted) {
  const fs::path marker = fs::temp_directory_path() / ("temper_hang_once_" + std::to_string(::getpid()));
  fs::remove(marker);
  ProgramOptions o = options("hang_once", 1, 1.0);
  o.command.push_back(marker.string());
  ProgramReward p(o);
  p.start();
  auto t0 = std::chrono::steady_clock::now();
  std::vector<ProgramScore> got = p.score(items(4), 0);
  EXPECT_LT(seconds_since(t0), 5.0);
  for (const ProgramScore& s : got) EXPECT_FALSE(s.ok);
  EXPECT_NE(got[0].error.find("timeout_s"), std::string::npos) << got[0].error;
  EXPECT_EQ(p.failures(), 4);
  got = p.score(items(4), 1);  // a fresh worker answers
  for (const ProgramScore& s : got) EXPECT_TRUE(s.ok);
  EXPECT_EQ(p.restarts(), 1);
  fs::remove(marker);
}

TEST(ProgramReward, ACrashOrAMalformedOrShortReplyFailsTheBatchAndTheWorkerComesBack) {
  for (const char* mode : {"crash", "malformed", "wrong_count"}) {
    ProgramReward p(options(mode));
    p.start();
    for (int round = 0; round < 2; ++round) {
      std::vector<ProgramScore> got = p.score(items(3), round);
      for (const ProgramScore& s : got) EXPECT_FALSE(s.ok) << mode;
    }
    EXPECT_EQ(p.failures(), 6) << mode;
    EXPECT_EQ(p.restarts(), 1) << mode;  // restarted for the second batch
  }
  ProgramReward crash(options("crash"));
  crash.start();
  std::vector<ProgramScore> got = crash.score(items(2), 0);
  EXPECT_NE(got[0].error.find("exited with status 3"), std::string::npos) << got[0].error;
}

TEST(ProgramReward, AnItemErrorFailsThatItemOnly) {
  ProgramReward p(options("item_error"));
  p.start();
  std::vector<std::string> in = {"{\"id\":\"a\",\"completion\":\"fine\"}", "{\"id\":\"b\",\"completion\":\"bad\"}"};
  std::vector<ProgramScore> got = p.score(in, 0);
  EXPECT_TRUE(got[0].ok);
  EXPECT_FALSE(got[1].ok);
  EXPECT_NE(got[1].error.find("cannot score this one"), std::string::npos);
  EXPECT_EQ(p.failures(), 1);
}

TEST(ProgramReward, ASlowStartIsWaitedFor) {
  ProgramReward p(options("slow_start", 2));
  auto t0 = std::chrono::steady_clock::now();
  p.start();
  EXPECT_GE(seconds_since(t0), 0.9);
  EXPECT_TRUE(p.score(items(2), 0)[1].ok);
}

TEST(ProgramReward, AWorkerThatCannotStartIsAnErrorNamingTheCommandAndItsStderr) {
  ProgramReward p(options("no_start"));
  try {
    p.start();
    FAIL() << "no error";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("fake_worker.py no_start"), std::string::npos) << m;
    EXPECT_NE(m.find("exited with status 2"), std::string::npos) << m;
    EXPECT_NE(m.find("cannot load my model"), std::string::npos) << m;
  }
  ProgramOptions missing = options("ok");
  missing.command = {"temper-no-such-reward-program"};
  ProgramReward q(missing);
  try {
    q.start();
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'temper-no-such-reward-program': not found in PATH"), std::string::npos)
        << e.what();
  }
  ProgramOptions slow = options("slow_start");
  slow.start_timeout_s = 0.2;
  ProgramReward r(slow);
  EXPECT_THROW(r.start(), Error);
}

TEST(ProgramReward, RepliesAreParsedStrictly) {
  EXPECT_EQ(parse_program_reply("[1, 0.5]", 2)[1].reward, 0.5);
  std::vector<ProgramScore> s =
      parse_program_reply(R"({"results": [{"reward": 2, "correct": true, "info": "ok"}, {"error": "x"}]})", 2);
  EXPECT_TRUE(s[0].ok && s[0].correct.value());
  EXPECT_FALSE(s[1].ok);
  EXPECT_THROW(parse_program_reply(R"({"results": [1]})", 2), Error);
  EXPECT_THROW(parse_program_reply(R"({"results": [{"reward": "high"}]})", 1), Error);
  EXPECT_THROW(parse_program_reply(R"({"rewards": [1]})", 1), Error);
  EXPECT_THROW(parse_program_reply("{", 1), Error);
}

}  // namespace
}  // namespace temper::reward
