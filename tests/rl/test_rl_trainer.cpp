// The RL step end to end on a tiny random model and a made-up task whose reward counts the letter
// 'a' in the completion: the reward rises under GRPO; a step is bitwise deterministic for any
// thread count; micro-batches accumulate to the same update as one batch; dynamic sampling drops
// groups whose rewards are all equal; a non-finite loss skips the update and the run goes on;
// methods' hooks run in order and can rewrite the batch.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <set>

#include "common/models.h"
#include "temper/core/thread_pool.h"
#include "temper/rl/rl_trainer.h"

using namespace temper;
using namespace temper::rl;

namespace {

char letter(int32_t t) { return static_cast<char>('a' + t % 26); }

// Prompt: 3 tokens from the index; reward: the share of 'a' in the completion. Problems whose index
// is divisible by 3 always score 1 (uniform groups, for dynamic sampling).
class LetterTask : public tasks::Task {
 public:
  std::string name() const override { return "letters"; }
  int64_t size(tasks::Split) const override { return -1; }
  tasks::Problem problem(tasks::Split, uint64_t i) const override {
    tasks::Problem p;
    p.id = std::to_string(i);
    p.prompt = std::string(1, letter(int32_t(i % 7))) + letter(int32_t(i % 5)) + letter(int32_t(i % 3));
    p.answer = "a";
    return p;
  }
  tasks::Verdict verify(const tasks::Problem& p, const std::string& c) const override {
    tasks::Verdict v;
    if (std::stoul(p.id) % 3 == 0 && uniform_) return v.reward = 1, v.correct = true, v;
    double n = 0;
    for (char ch : c) n += ch == 'a';
    v.reward = c.empty() ? 0 : n / double(c.size());
    v.correct = v.reward > 0.5;
    return v;
  }
  bool uniform_ = false;
};

PromptCodec codec() {
  PromptCodec c;
  c.encode_prompt = [](const tasks::Problem& p) {
    std::vector<int32_t> ids;
    for (char ch : p.prompt) ids.push_back(ch - 'a' + 1);
    return ids;
  };
  c.encode_completion = [](const std::string& s) { return std::vector<int32_t>(s.size(), 0); };
  c.decode = [](const std::vector<int32_t>& ids) {
    std::string s;
    for (int32_t t : ids) s += letter(t);
    return s;
  };
  return c;
}

RlConfig config() {
  RlConfig c;
  c.prompts_per_step = 4;
  c.group_size = 6;
  c.max_new = 6;
  c.optimizer.lr.peak = 3e-3;
  c.optimizer.adamw.weight_decay = 0;
  c.kv_memory_mb = 4;
  c.seed = 5;
  return c;
}

double value(const Metrics& m, const std::string& k) {
  for (auto& [n, v] : m)
    if (n == k) return v;
  ADD_FAILURE() << "no metric " << k;
  return NAN;
}

struct RlSetup {
  ModelConfig cfg = test::small_config(Arch::llama, 64);
  Transformer model{cfg};
  std::shared_ptr<LetterTask> task = std::make_shared<LetterTask>();
  reward::SafeReward safe;
  explicit RlSetup(uint64_t seed = 3) { model.init_random(seed, 0.05f); }
};

}  // namespace

TEST(RlTrainer, RewardRisesUnderGrpo) {
  RlSetup s;
  RlTrainer t(s.model, s.task, codec(), config(), s.safe);
  std::vector<double> r;
  for (int i = 0; i < 30; ++i) r.push_back(value(t.step(), "reward_mean"));
  double first = (r[0] + r[1] + r[2]) / 3, last = (r[27] + r[28] + r[29]) / 3;
  std::printf("reward: first 3 steps %.3f, last 3 steps %.3f\n", first, last);
  EXPECT_LT(first, 0.2);
  EXPECT_GT(last, first + 0.3);
  EXPECT_EQ(t.steps_done(), 30);
  EXPECT_EQ(t.cursor(), 120u);
}

TEST(RlTrainer, StepsAreBitwiseDeterministicAcrossThreadCounts) {
  std::vector<std::vector<float>> params;
  std::vector<std::vector<double>> rewards;
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    RlSetup s;
    RlTrainer t(s.model, s.task, codec(), config(), s.safe);
    std::vector<double> r;
    for (int i = 0; i < 3; ++i) {
      Metrics m = t.step();
      r.push_back(value(m, "reward_mean"));
      r.push_back(value(m, "loss"));
      r.push_back(value(m, "grad_norm"));
    }
    rewards.push_back(r);
    params.emplace_back(s.model.params(), s.model.params() + s.model.flat_size());
  }
  set_num_threads(default_num_threads());
  EXPECT_EQ(rewards[0], rewards[1]);
  EXPECT_EQ(0, std::memcmp(params[0].data(), params[1].data(), params[0].size() * sizeof(float)));
}

TEST(RlTrainer, MicroBatchesAccumulateToTheSameUpdate) {
  std::vector<std::vector<float>> grads;  // the accumulated (clipped) gradient of each run
  for (int64_t micro : {0, 5}) {
    RlSetup s;
    RlConfig c = config();
    c.micro_batch = micro;
    RlTrainer t(s.model, s.task, codec(), c, s.safe);
    t.step();
    grads.emplace_back(s.model.grads(), s.model.grads() + s.model.flat_size());
  }
  double worst = 0, scale = 0;
  for (size_t i = 0; i < grads[0].size(); ++i) {
    worst = std::max(worst, double(std::fabs(grads[0][i] - grads[1][i])));
    scale = std::max(scale, double(std::fabs(grads[0][i])));
  }
  EXPECT_GT(scale, 1e-4);
  EXPECT_LT(worst, 1e-5 * scale) << "micro-batches of 5 vs one batch of 24 sequences";
}

TEST(RlTrainer, DynamicSamplingDropsUniformGroupsAndRefills) {
  RlSetup s;
  s.task->uniform_ = true;
  RlConfig c = config();
  c.dynamic_sampling = true;
  RlTrainer t(s.model, s.task, codec(), c, s.safe);
  Metrics m = t.step();
  const Batch& b = t.last_batch();
  EXPECT_GT(value(m, "groups_dropped"), 0);
  EXPECT_GT(value(m, "prompts_drawn"), 4);
  for (const Trajectory& x : b.traj) EXPECT_NE(std::stoul(b.problems[x.problem].id) % 3, 0u);
  // every kept group has rewards that differ
  std::map<int64_t, std::set<double>> by_group;
  for (const Trajectory& x : b.traj) by_group[x.group].insert(x.reward);
  for (auto& [g, rs] : by_group) EXPECT_GT(rs.size(), 1u) << "group " << g;
}

namespace {
// Records the hook order; drops the last trajectory after the rollout; NaN advantages on request.
struct Recorder : Method {
  std::vector<std::string> calls;
  bool nan = false;
  std::string name() const override { return "recorder"; }
  void after_rollout(Batch& b) override {
    calls.push_back("after_rollout");
    for (auto& t : b.traj) EXPECT_FALSE(t.scored);
    b.traj.pop_back();
  }
  void after_reward(Batch& b) override {
    calls.push_back("after_reward");
    for (auto& t : b.traj) EXPECT_TRUE(t.scored);
  }
  bool advantages(Batch& b) override {
    calls.push_back("advantages");
    if (!nan) return false;
    for (auto& t : b.traj) t.advantage.assign(t.tokens.size(), NAN);
    return true;
  }
  void token_weights(Batch& b) override {
    calls.push_back("token_weights");
    for (auto& t : b.traj) EXPECT_EQ(t.weight.size(), t.tokens.size());
  }
  void after_step(const Metrics&) override { calls.push_back("after_step"); }
};
}  // namespace

TEST(RlTrainer, MethodHooksRunInOrderAndANonFiniteLossSkipsTheUpdate) {
  RlSetup s;
  Recorder rec;
  RlTrainer t(s.model, s.task, codec(), config(), s.safe, {&rec});
  Metrics m = t.step();
  EXPECT_EQ(rec.calls, (std::vector<std::string>{"after_rollout", "after_reward", "advantages", "token_weights", "after_step"}));
  EXPECT_EQ(value(m, "sequences"), 23);
  EXPECT_EQ(value(m, "updates"), 1);
  rec.nan = true;
  std::vector<float> before(s.model.params(), s.model.params() + s.model.flat_size());
  m = t.step();
  EXPECT_EQ(value(m, "updates_skipped"), 1);
  EXPECT_EQ(value(m, "updates"), 0);
  EXPECT_EQ(0, std::memcmp(before.data(), s.model.params(), before.size() * sizeof(float)));
  rec.nan = false;
  m = t.step();  // the run goes on
  EXPECT_EQ(value(m, "updates"), 1);
  EXPECT_EQ(t.optimizer().skipped(), 1);
}
