// Multi-turn RL on conversations with an environment (rl/env_rollout.h) on the tiny model: every episode's
// observations are appended where its turns end and are out of the loss, each sampled token's rollout
// log-prob equals the training forward's over the whole conversation (f32, <= 1e-5), returns are the sums
// of the per-turn rewards, failures cost the episode only, and GRPO on the environment's reward raises it. A block of
// a round's problems (an explorer rank's) converses as the whole round does, and the blocks' env/ metrics merge into
// the whole round's.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>

#include "common/error_of.h"
#include "rl/letter_task.h"
#include "temper/core/error.h"
#include "temper/rl/env_rollout.h"
#include "temper/rl/token_rows.h"

using namespace temper;
using namespace temper::rl;
using namespace temper::test;
using json = nlohmann::ordered_json;

namespace {

constexpr int32_t kSep = 27, kEndOfTurn = 28, kStop = 29;

std::vector<int32_t> letters(const std::string& s) {
  std::vector<int32_t> v;
  for (char ch : s) v.push_back(ch >= 'a' && ch <= 'z' ? ch - 'a' : kSep);
  return v;
}
std::string text_of(const std::vector<int32_t>& ids) {
  std::string s;
  for (int32_t t : ids)
    if (t < 26) s += static_cast<char>('a' + t);
  return s;
}
double share_of_a(const std::string& s) {
  double n = 0;
  for (char c : s) n += c == 'a';
  return s.empty() ? 0 : n / double(s.size());
}

// Each turn scores the share of 'a' in the assistant's text; the observation is "bc" + the turn number;
// done after three turns. Problem ids ending in 7 fail at their second step (an environment error).
class LettersEnv : public env::Environment {
 public:
  std::string name() const override { return "letters"; }
  env::EnvReply reset(const std::string& ep, const json& row) override {
    std::lock_guard<std::mutex> lk(mu_);
    turns_[ep] = 0;
    fail_[ep] = row.value("id", std::string()).back() == '7';
    env::EnvReply r;
    r.messages = json::array({{{"role", "user"}, {"content", row.value("prompt", std::string())}}});
    return r;
  }
  env::EnvReply step(const std::string& ep, const json& msg) override {
    std::lock_guard<std::mutex> lk(mu_);
    const int t = ++turns_.at(ep);
    env::EnvReply r;
    if (fail_.at(ep) && t == 2) return r.ok = false, r.error = "scripted failure", r;
    r.reward = share_of_a(msg.value("content", std::string()));
    r.done = t >= 3;
    r.correct = r.reward > 0.5;
    r.messages = json::array({{{"role", "user"}, {"content", std::string("bc") + char('a' + t)}}});
    return r;
  }
  void close(const std::string& ep) override {
    std::lock_guard<std::mutex> lk(mu_);
    ++closed_;
    turns_.erase(ep);
  }
  std::mutex mu_;
  std::map<std::string, int> turns_;
  std::map<std::string, bool> fail_;
  int closed_ = 0;
};

ConversationCodec letters_codec() {
  ConversationCodec c;
  c.encode_start = [](const json& msgs, const json&) {
    std::vector<int32_t> v;
    for (const json& m : msgs)
      for (int32_t t : letters(m["content"].get<std::string>())) v.push_back(t);
    return v;
  };
  c.encode_continuation = [](const json& msgs, const json&) {
    std::vector<int32_t> v = {kSep};
    for (const json& m : msgs)
      for (int32_t t : letters(m["content"].get<std::string>())) v.push_back(t);
    return v;
  };
  c.assistant_message = [](const std::vector<int32_t>& turn) {
    return json{{"role", "assistant"}, {"content", text_of(turn)}};
  };
  c.decode = text_of;
  c.stop_ids = {kStop};
  c.end_of_turn = kEndOfTurn;
  return c;
}

rollout::RolloutRequest proto(int64_t g, int64_t max_new, uint64_t seed) {
  rollout::SamplerConfig sc;
  sc.temperature = 1.0f;
  return rollout::make_request({0}, g, max_new, 64, sc, {kStop}, seed, 0);
}

// The task's first n training problems, each indexed as in a round.
std::vector<tasks::Problem> train_problems(const RlSetup& s, uint64_t n) {
  std::vector<tasks::Problem> problems;
  for (uint64_t i = 0; i < n; ++i) {
    problems.push_back(s.task->problem(tasks::Split::train, i));
    problems.back().index = static_cast<int64_t>(i);
  }
  return problems;
}

}  // namespace

TEST(EnvRollout, ConversationsRecordObservationsAndScoreReturns) {
  RlSetup s;
  LettersEnv env;
  EnvRolloutConfig ec;
  ec.max_turns = 3;
  ec.turn_max_new = 4;
  EnvRollout er(env, letters_codec(), ec);
  KvPool pool(s.cfg, 8, 128);
  rollout::RolloutEngine engine(s.model, pool);
  const std::vector<tasks::Problem> problems = train_problems(s, 8);
  std::vector<Trajectory> traj = er.run(engine, problems, 0, 3, proto(3, 40, 9), 64, "t", 0);
  ASSERT_EQ(traj.size(), 24u);
  EXPECT_EQ(env.closed_, 24);
  EXPECT_EQ(pool.free_blocks(), 128);
  int64_t appended = 0;
  for (const Trajectory& t : traj) {
    const bool fails = problems[static_cast<size_t>(t.problem)].id.back() == '7';
    // Turns: the sampled runs between appended spans; the observation after turn k is [end of turn if the turn
    // was cut,] sep, "bc" + letter k.
    double ret = 0;
    int64_t at = 0, k = 0;
    for (auto [from, n] : t.appended) {
      ++k;
      std::vector<int32_t> turn(t.tokens.begin() + at, t.tokens.begin() + from);
      ASSERT_FALSE(turn.empty());
      const bool cut = turn.back() != kStop;
      EXPECT_LE(turn.size(), 4u);
      ret += share_of_a(text_of(turn));
      std::vector<int32_t> want = letters(std::string("|bc") + char('a' + k));
      if (cut) want.insert(want.begin(), kEndOfTurn);
      EXPECT_EQ(std::vector<int32_t>(t.tokens.begin() + from, t.tokens.begin() + from + n), want);
      for (int64_t i = from; i < from + n; ++i) EXPECT_EQ(t.old_logprob[static_cast<size_t>(i)], 0.f);
      at = from + n;
      appended += n;
    }
    if (fails) {
      EXPECT_EQ(t.reward, 0.0);  // failure_reward
      EXPECT_NE(t.reward_info.find("scripted failure"), std::string::npos);
      EXPECT_EQ(t.appended.size(), 1u);  // the failing step's turn got no observation
    } else {
      EXPECT_EQ(t.appended.size(), 2u);  // three turns, done after the third
      std::vector<int32_t> last(t.tokens.begin() + at, t.tokens.end());
      ret += share_of_a(text_of(last));
      EXPECT_NEAR(t.reward, ret, 1e-12);
    }
    EXPECT_TRUE(t.scored);
  }
  EXPECT_EQ(er.stats().failures, 3);
  EXPECT_EQ(engine.stats().appended_tokens, appended);

  // The invariant: every sampled token's recorded log-prob is the training forward's over the conversation.
  Batch b;
  b.problems = problems;
  b.traj = std::move(traj);
  double worst = 0;
  for (const Trajectory& t : b.traj) {
    std::vector<int32_t> seq = t.prompt;
    seq.insert(seq.end(), t.tokens.begin(), t.tokens.end());
    const int64_t T = static_cast<int64_t>(seq.size());
    std::vector<int32_t> tgt(T, -1);
    for (int64_t i = 0; i + 1 < T; ++i) tgt[i] = seq[i + 1];
    std::vector<float> lp(T), ent(T);
    s.model.forward_logprobs(seq.data(), tgt.data(), 1, T, lp.data(), ent.data());
    std::vector<bool> obs(t.tokens.size(), false);
    for (auto [from, n] : t.appended)
      for (int64_t i = from; i < from + n; ++i) obs[static_cast<size_t>(i)] = true;
    for (size_t i = 0; i < t.tokens.size(); ++i)
      if (!obs[i]) worst = std::max(worst, double(std::fabs(lp[t.prompt.size() - 1 + i] - t.old_logprob[i])));
  }
  std::printf("largest |rollout - training| log-prob over conversations: %.3g\n", worst);
  EXPECT_LT(worst, 1e-5);
}

// GRPO through the trainer on the environment's reward: the returns rise, observations stay out of the loss.
TEST(EnvRollout, GrpoOnConversationsRaisesTheReturn) {
  RlSetup s;
  LettersEnv env;
  EnvRolloutConfig ec;
  ec.max_turns = 3;
  ec.turn_max_new = 4;
  RlConfig cfg = config();
  cfg.max_new = 24;
  PromptCodec pc = codec();
  pc.stop_ids = {kStop};
  RlTrainer t(s.model, s.task, pc, cfg, s.safe);
  t.set_environment(std::make_unique<EnvRollout>(env, letters_codec(), ec));
  std::vector<double> r;
  for (int i = 0; i < 25; ++i) {
    Metrics m = t.step();
    r.push_back(value(m, "reward_mean"));
    EXPECT_GE(value(m, "env/turns"), 1.0);
    EXPECT_LE(value(m, "env/turns"), 3.0);
    for (const Trajectory& tr : t.last_batch().traj)
      for (auto [from, n] : tr.appended)
        for (int64_t k = from; k < from + n; ++k) ASSERT_EQ(tr.loss_mask[static_cast<size_t>(k)], 0.f);
  }
  const double first = (r[0] + r[1] + r[2]) / 3, last = (r[22] + r[23] + r[24]) / 3;
  std::printf("return: first 3 steps %.3f, last 3 steps %.3f\n", first, last);
  EXPECT_GT(last, first + 0.5);
}

// The environment answers some episodes late (a sleep in step): by default (deterministic) an answer goes back
// answer_steps decode steps after its turn ended, waited for if it is late, so tokens, log-probs and the engine's steps
// do not depend on which episodes were slow; with deterministic = false the late answers join later batches (the
// schedule changes with the timing).
TEST(EnvRollout, DeterministicConversationsDoNotDependOnTheEnvironmentsTiming) {
  class SlowLetters final : public LettersEnv {
   public:
    SlowLetters(int slow_parity, int slow_ms) : parity_(slow_parity), ms_(slow_ms) {}
    env::EnvReply step(const std::string& ep, const json& msg) override {
      if (static_cast<int>(ep.back() - '0') % 2 == parity_) std::this_thread::sleep_for(std::chrono::milliseconds(ms_));
      return LettersEnv::step(ep, msg);
    }
    int parity_, ms_;
  };
  RlSetup s;
  const std::vector<tasks::Problem> problems = train_problems(s, 6);
  struct Run {
    std::vector<Trajectory> traj;
    int64_t steps = 0;
  };
  auto run = [&](int slow_parity, bool deterministic, int64_t answer_steps = 1, int slow_ms = 20) {
    SlowLetters env(slow_parity, slow_ms);
    EnvRolloutConfig ec;
    ec.max_turns = 3;
    ec.turn_max_new = 4;
    ec.threads = 8;
    ec.deterministic = deterministic;
    ec.answer_steps = answer_steps;
    EnvRollout er(env, letters_codec(), ec);
    KvPool pool(s.cfg, 12, 128);
    rollout::RolloutEngine engine(s.model, pool);
    Run r{er.run(engine, problems, 0, 2, proto(2, 40, 5), 64, "t", 0), 0};
    r.steps = engine.stats().steps;
    return r;
  };
  for (int64_t answer_steps : {1, 3}) {  // answers due at the next step, or three steps after the turn ended
    const Run a = run(0, true, answer_steps), b = run(1, true, answer_steps);
    ASSERT_EQ(a.traj.size(), 12u);
    ASSERT_EQ(b.traj.size(), a.traj.size());
    EXPECT_EQ(a.steps, b.steps) << answer_steps;
    for (size_t i = 0; i < a.traj.size(); ++i) {
      EXPECT_EQ(a.traj[i].tokens, b.traj[i].tokens) << i;
      EXPECT_EQ(a.traj[i].appended, b.traj[i].appended) << i;
      EXPECT_EQ(std::memcmp(a.traj[i].old_logprob.data(), b.traj[i].old_logprob.data(),
                            a.traj[i].old_logprob.size() * sizeof(float)),
                0)
          << i;
    }
  }
  // The same two timings without the wait: the engine decodes on while the slow half is out, so it takes a different
  // number of steps (what the deterministic runs above are protected from). Timing-dependent by nature: on a loaded
  // machine a decode step can outlast the delay, so the slow half is 100 ms and up to three pairs are tried.
  bool differed = false;
  for (int attempt = 0; attempt < 3 && !differed; ++attempt)
    differed = run(0, false, 1, 100).steps != run(1, false, 1, 100).steps;
  EXPECT_TRUE(differed) << "without env.deterministic the engine's steps did not depend on the environment's timing";
}

// An explorer rank's block of a round (rl/async_remote.h): problems [2, 5) of five run with offset 2 hold the
// whole round's episodes for those problems (the same names, so the same environment state, and the same sampling
// streams, so the same tokens); run with offset 0 they would draw the first block's streams instead. The blocks'
// env/ metrics merged (ConversationSource::merge_metrics) are the whole round's: counts equal, means up to rounding.
TEST(EnvRollout, ABlockOfARoundConversesAsTheWholeRound) {
  struct Named final : LettersEnv {
    env::EnvReply reset(const std::string& ep, const json& row) override {
      {
        std::lock_guard<std::mutex> lk(names_mu);
        names.push_back(ep);
      }
      return LettersEnv::reset(ep, row);
    }
    std::mutex names_mu;
    std::vector<std::string> names;
  };
  RlSetup s;
  const std::vector<tasks::Problem> problems = train_problems(s, 5);
  struct Run {
    std::vector<Trajectory> traj;
    Metrics metrics;
    std::vector<std::string> names;
  };
  auto run = [&](size_t from, size_t to, size_t offset) {
    Named env;
    EnvRolloutConfig ec;
    ec.max_turns = 3;
    ec.turn_max_new = 4;
    EnvRollout er(env, letters_codec(), ec);
    KvPool pool(s.cfg, 10, 128);
    rollout::RolloutEngine engine(s.model, pool);
    const std::vector<tasks::Problem> block(problems.begin() + from, problems.begin() + to);
    Run r{er.run(engine, block, 0, 2, proto(2, 40, 11), 64, "s0r0", offset), {}, env.names};
    er.metrics(r.metrics);
    std::sort(r.names.begin(), r.names.end());
    return r;
  };
  const Run whole = run(0, 5, 0), head = run(0, 2, 0), tail = run(2, 5, 2), dropped = run(2, 5, 0),
            empty = run(5, 5, 5);  // more explorer ranks than problems: a rank's block is empty
  ASSERT_EQ(whole.traj.size(), 10u);
  ASSERT_EQ(head.traj.size() + tail.traj.size(), 10u);
  std::vector<std::string> names = head.names;
  names.insert(names.end(), tail.names.begin(), tail.names.end());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, whole.names);
  EXPECT_EQ(tail.names.front(), "s0r0/2/0");
  double worst = 0;
  bool dropped_differs = false;
  for (size_t i = 0; i < whole.traj.size(); ++i) {
    const bool in_tail = i >= head.traj.size();
    const Trajectory& b = in_tail ? tail.traj[i - head.traj.size()] : head.traj[i];
    const Trajectory& w = whole.traj[i];
    EXPECT_EQ(b.problem + (in_tail ? 2 : 0), w.problem) << i;
    EXPECT_EQ(b.member, w.member) << i;
    EXPECT_EQ(b.tokens, w.tokens) << i;
    EXPECT_EQ(b.appended, w.appended) << i;
    EXPECT_EQ(b.reward, w.reward) << i;
    ASSERT_EQ(b.old_logprob.size(), w.old_logprob.size()) << i;
    for (size_t k = 0; k < b.old_logprob.size(); ++k)
      worst = std::max(worst, double(std::fabs(b.old_logprob[k] - w.old_logprob[k])));
    if (in_tail) dropped_differs = dropped_differs || dropped.traj[i - head.traj.size()].tokens != w.tokens;
  }
  std::printf("largest |block - whole round| sampling log-prob: %.3g\n", worst);
  EXPECT_LT(worst, 1e-5);
  EXPECT_TRUE(dropped_differs) << "without its offset the block samples other streams";

  EnvRolloutConfig ec;
  LettersEnv env;
  const EnvRollout er(env, letters_codec(), ec);
  Metrics merged;
  er.merge_metrics(merged, head.metrics);
  er.merge_metrics(merged, tail.metrics);
  EXPECT_TRUE(empty.traj.empty());
  EXPECT_EQ(value(empty.metrics, "env/episodes"), 0.0);
  er.merge_metrics(merged, empty.metrics);
  ASSERT_EQ(merged.size(), whole.metrics.size());
  for (size_t i = 0; i < merged.size(); ++i) {
    const auto& [name, x] = merged[i];
    EXPECT_EQ(name, whole.metrics[i].first);
    if (name == "env/call_s") continue;  // wall time
    EXPECT_NEAR(x, whole.metrics[i].second, 1e-12) << name;
  }
  EXPECT_EQ(value(merged, "env/episodes"), 10.0);
  EXPECT_EQ(value(merged, "env/failures"), value(whole.metrics, "env/failures"));
}

// The merge rule on numbers: blocks of 2 and 6 episodes with 3 and 1 turns each: 12 turns over 8 episodes, 1.5 (not
// the blocks' plain mean, 2); counts add; env/call_s is weighted by the step calls; a metric without a rule fails.
TEST(EnvRollout, BlocksMergeCountsByAddingAndMeansByTheirCounts) {
  LettersEnv env;
  const EnvRollout er(env, letters_codec(), EnvRolloutConfig{});
  auto block = [](double episodes, double turns, double solved, double failures, double calls, double call_s) {
    return Metrics{{"env/turns", turns},       {"env/tool_calls", 0.0},    {"env/malformed_calls", 1.0},
                   {"env/failures", failures}, {"env/truncated", 0.0},     {"env/solved", solved},
                   {"env/call_s", call_s},     {"env/episodes", episodes}, {"env/step_calls", calls}};
  };
  Metrics m;
  er.merge_metrics(m, block(2, 3.0, 0.5, 1, 4, 0.1));
  EXPECT_EQ(m, block(2, 3.0, 0.5, 1, 4, 0.1)) << "the first block as it is";
  er.merge_metrics(m, block(6, 1.0, 0.0, 0, 12, 0.5));
  EXPECT_DOUBLE_EQ(value(m, "env/turns"), 1.5);
  EXPECT_DOUBLE_EQ(value(m, "env/solved"), 0.125);
  EXPECT_DOUBLE_EQ(value(m, "env/call_s"), (0.1 * 4 + 0.5 * 12) / 16);
  EXPECT_EQ(value(m, "env/failures"), 1.0);
  EXPECT_EQ(value(m, "env/malformed_calls"), 2.0);
  EXPECT_EQ(value(m, "env/episodes"), 8.0);
  EXPECT_EQ(value(m, "env/step_calls"), 16.0);
  er.merge_metrics(m, block(0, 0.0, 0.0, 0, 0, 0.0));  // an empty block (more explorer ranks than problems)
  EXPECT_DOUBLE_EQ(value(m, "env/turns"), 1.5);
  EXPECT_EQ(value(m, "env/episodes"), 8.0);
  Metrics odd = {{"env/new_thing", 1.0}};
  const Metrics other = odd;
  EXPECT_NE(error_of([&] { merge_metric_blocks(odd, other, {}); }).find("no rule merges env/new_thing"),
            std::string::npos);
}
