// The run's reward (rl/reward_set.h): weighted [[reward]] terms over the task's verifier and a reward program,
// on_failure for samples a term fails, and a verifier that hangs costing its sample, not the run (a worker thread
// abandoned at the timeout; a forked child killed at it, where thread mode moves once hung calls reach the limit).
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "temper/core/error.h"
#include "temper/reward/forked_calls.h"
#include "temper/reward/threaded_calls.h"
#include "temper/rl/reward_set.h"

namespace temper::rl {
namespace {

const std::string kWorker = std::string(TEMPER_TEST_SOURCE_DIR) + "/reward/workers/fake_worker.py";

// reward 1 when the completion equals the answer; a completion "hang" never returns, "throw" throws.
class EchoTask : public tasks::Task {
 public:
  std::string name() const override { return "echo"; }
  int64_t size(tasks::Split) const override { return -1; }
  tasks::Problem problem(tasks::Split, uint64_t i) const override {
    tasks::Problem p;
    p.id = "echo/" + std::to_string(i);
    p.prompt = "say " + std::to_string(i);
    p.answer = std::to_string(i);
    return p;
  }
  tasks::Verdict verify(const tasks::Problem& p, const std::string& c) const override {
    if (c == "hang") std::this_thread::sleep_for(std::chrono::hours(1));
    if (c == "throw") throw std::runtime_error("bad sample");
    tasks::Verdict v;
    v.correct = c == p.answer;
    v.reward = v.correct ? 1.0 : 0.0;
    v.extracted = c;
    v.rewards = {v.reward, 0.5};
    return v;
  }
};

struct Fixture {
  std::shared_ptr<EchoTask> task = std::make_shared<EchoTask>();
  std::vector<tasks::Problem> problems;
  std::vector<std::string> completions;
  std::vector<RewardQuery> queries() const {
    std::vector<RewardQuery> q;
    for (size_t i = 0; i < completions.size(); ++i) q.push_back({&problems[i], &completions[i], std::to_string(i)});
    return q;
  }
  explicit Fixture(std::vector<std::string> c) : completions(std::move(c)) {
    for (size_t i = 0; i < completions.size(); ++i) problems.push_back(task->problem(tasks::Split::train, i));
  }
};

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

TEST(RewardSet, WithoutTermsTheRewardIsTheVerdict) {
  Fixture f({"0", "x", "2"});
  reward::SafeReward safe;
  for (VerifierIsolation iso : {VerifierIsolation::thread, VerifierIsolation::process}) {
    RewardSet rs(f.task, safe, {}, nullptr, {}, iso);
    std::vector<ScoredCompletion> got = rs.score(f.queries(), 0);
    ASSERT_EQ(got.size(), 3u);
    EXPECT_EQ(got[0].verdict.reward, 1.0);
    EXPECT_TRUE(got[0].verdict.correct);
    EXPECT_EQ(got[0].verdict.extracted.value(), "0");
    EXPECT_EQ(got[0].verdict.rewards, (std::vector<double>{1.0, 0.5}));
    EXPECT_EQ(got[1].verdict.reward, 0.0);
    EXPECT_TRUE(got[0].terms.empty());
  }
}

TEST(RewardSet, TermsAreWeightedAndAProgramFailureScoresOnFailure) {
  Fixture f({"0", "xx", "2222"});
  reward::SafeReward safe;
  RewardTermConfig builtin;
  builtin.name = "task";
  builtin.builtin = true;
  builtin.weight = 2;
  RewardTermConfig len;
  len.name = "len";
  len.program = {"python3", kWorker, "ok"};
  len.weight = 0.5;
  RewardSet rs(f.task, safe, {builtin, len});
  rs.start();
  std::vector<ScoredCompletion> got = rs.score(f.queries(), 3);
  EXPECT_DOUBLE_EQ(got[0].verdict.reward, 2 * 1.0 + 0.5 * 0.1);
  EXPECT_DOUBLE_EQ(got[1].verdict.reward, 2 * 0.0 + 0.5 * 0.2);
  EXPECT_DOUBLE_EQ(got[2].verdict.reward, 2 * 0.0 + 0.5 * 0.4);
  EXPECT_EQ(got[2].terms, (std::vector<double>{0.0, 0.4}));
  ASSERT_EQ(got[2].components.size(), 1u);
  EXPECT_EQ(got[2].components[0].first, "len.len");
  EXPECT_EQ(got[2].info, "len: step 3 id 2");

  RewardTermConfig broken = len;
  broken.name = "broken";
  broken.program = {"python3", kWorker, "malformed"};
  broken.on_failure = -1;
  RewardSet rb(f.task, safe, {builtin, broken});
  rb.start();
  got = rb.score(f.queries(), 0);
  EXPECT_DOUBLE_EQ(got[0].verdict.reward, 2 * 1.0 + 0.5 * -1.0);
  EXPECT_EQ(rb.failures(), 3);
}

TEST(RewardSet, AConfigWithoutOneSourceIsRefused) {
  RewardTermConfig c;
  c.name = "x";
  EXPECT_THROW(c.validate(), Error);
  c.builtin = true;
  c.program = {"python3"};
  EXPECT_THROW(c.validate(), Error);
  c.program.clear();
  c.validate();
  c.name = "bad name";
  EXPECT_THROW(c.validate(), Error);
}

TEST(RewardSet, AHangingVerifierInAChildProcessCostsItsSampleOnly) {
  Fixture f({"0", "hang", "2", "throw", "4"});
  reward::SafeRewardOptions so;
  so.timeout_s = 0.5;
  reward::SafeReward safe(so);
  RewardSet rs(f.task, safe, {}, nullptr, {}, VerifierIsolation::process);
  auto t0 = std::chrono::steady_clock::now();
  std::vector<ScoredCompletion> got = rs.score(f.queries(), 0);
  EXPECT_LT(seconds_since(t0), 5.0);
  EXPECT_EQ(got[0].verdict.reward, 1.0);
  EXPECT_EQ(got[1].verdict.reward, 0.0);
  EXPECT_EQ(got[2].verdict.reward, 1.0);  // after the killed child, a fresh one goes on
  EXPECT_EQ(got[3].verdict.reward, 0.0);
  EXPECT_EQ(got[4].verdict.reward, 1.0);
  EXPECT_EQ(rs.failures(), 2);
}

TEST(RewardSet, ThreadModeMovesToAChildProcessOnceHungCallsReachTheLimit) {
  reward::SafeRewardOptions so;
  so.timeout_s = 0.2;
  so.max_abandoned = 1;
  reward::SafeReward safe(so);
  Fixture f({"0", "hang", "2"});
  RewardSet rs(f.task, safe, {}, nullptr, {}, VerifierIsolation::thread);
  // The hang is abandoned with its thread and a fresh thread verifies the rest.
  std::vector<ScoredCompletion> got = rs.score(f.queries(), 0);
  EXPECT_EQ(rs.isolation(), VerifierIsolation::thread);
  EXPECT_EQ(got[0].verdict.reward, 1.0);
  EXPECT_EQ(got[1].verdict.reward, 0.0);
  EXPECT_EQ(got[2].verdict.reward, 1.0);
  // One call never returned (the limit is 1): the verifier moves to a child process, killed at the timeout.
  got = rs.score(f.queries(), 1);
  EXPECT_EQ(rs.isolation(), VerifierIsolation::process);
  EXPECT_EQ(got[0].verdict.reward, 1.0);
  EXPECT_EQ(got[1].verdict.reward, 0.0);
  EXPECT_EQ(got[2].verdict.reward, 1.0);
  EXPECT_EQ(rs.failures(), 2);
}

TEST(ThreadedCalls, AHungItemIsAbandonedWithItsThreadAndTheRestGoOn) {
  reward::ThreadedCalls calls;
  std::vector<std::string> why;
  auto t0 = std::chrono::steady_clock::now();
  std::vector<std::optional<std::string>> got = calls.run(
      5,
      [](size_t i) -> std::string {
        if (i == 1) std::this_thread::sleep_for(std::chrono::hours(1));
        if (i == 3) throw std::runtime_error("bad");
        return std::string(i, 'x');
      },
      0.2, &why);
  EXPECT_LT(seconds_since(t0), 3.0);
  EXPECT_EQ(got[0].value(), "");
  EXPECT_FALSE(got[1].has_value());
  EXPECT_NE(why[1].find("abandoned"), std::string::npos);
  EXPECT_EQ(got[2].value(), "xx");
  EXPECT_FALSE(got[3].has_value());
  EXPECT_EQ(why[3], "exception: bad");
  EXPECT_EQ(got[4].value(), "xxxx");
  EXPECT_EQ(calls.abandoned_running(), 1);
  EXPECT_EQ(calls.timeouts(), 1);
  EXPECT_EQ(calls.exceptions(), 1);
}

TEST(ForkedCalls, ResultsStreamBackInOrderAndACrashCostsOneItem) {
  reward::ForkedCallsStats st;
  std::vector<std::string> why;
  std::vector<std::optional<std::string>> got = reward::run_forked(
      6,
      [](size_t i) {
        if (i == 2) std::abort();
        return std::string(i, 'x');
      },
      5.0, &st, &why);
  ASSERT_EQ(got.size(), 6u);
  EXPECT_EQ(got[1].value(), "x");
  EXPECT_FALSE(got[2].has_value());
  EXPECT_NE(why[2].find("signal"), std::string::npos) << why[2];
  EXPECT_EQ(got[5].value(), "xxxxx");
  EXPECT_EQ(st.children, 2);
  EXPECT_EQ(st.crashes, 1);
}

}  // namespace
}  // namespace temper::rl
