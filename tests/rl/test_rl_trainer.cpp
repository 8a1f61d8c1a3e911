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

#include "rl/letter_task.h"
#include "temper/core/error.h"
#include "temper/core/thread_pool.h"
#include "temper/rl/packed_rows.h"
#include "temper/rl/rl_trainer.h"

using namespace temper;
using namespace temper::rl;

using namespace temper::test;

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

TEST(RlTrainer, MicroBatchesOfMixedLengthsAreCutToTheirLongestRowAndAccumulateTheSame) {
  // A stop token makes completions of different lengths: micro-batches sorted by length and cut to
  // their own longest row give the whole batch's gradient, for token- and sequence-mean losses.
  for (LossAgg agg : {LossAgg::token_mean, LossAgg::seq_mean_token_mean}) {
    std::vector<std::vector<float>> grads;
    std::set<size_t> lengths;
    for (int64_t micro : {0, 5}) {
      RlSetup s;
      RlConfig c = config();
      c.micro_batch = micro;
      c.loss.agg = agg;
      PromptCodec pc = codec();
      for (int32_t id = 0; id < 40; ++id) pc.stop_ids.insert(id);  // about 1 in 3 tokens stops
      RlTrainer t(s.model, s.task, pc, c, s.safe);
      t.step();
      for (const Trajectory& x : t.last_batch().traj) lengths.insert(x.tokens.size());
      grads.emplace_back(s.model.grads(), s.model.grads() + s.model.flat_size());
    }
    EXPECT_GE(lengths.size(), 3u);  // the rows really differ in length
    double worst = 0, scale = 0;
    for (size_t i = 0; i < grads[0].size(); ++i) {
      worst = std::max(worst, double(std::fabs(grads[0][i] - grads[1][i])));
      scale = std::max(scale, double(std::fabs(grads[0][i])));
    }
    EXPECT_GT(scale, 1e-4);
    EXPECT_LT(worst, 1e-5 * scale);
  }
}

TEST(PackedRows, EqualPromptsAreHeldOnceAndEveryCompletionTokenKeepsItsRow) {
  const std::vector<int32_t> a = {1, 2, 3}, b = {4, 5}, c = {6};
  const int64_t T = 6;  // padded rows: row r's token t at r * 6 + t
  PackedRows p = pack_rows({&a, &b, &a, &c, &b}, {5, 3, 4, 3, 2}, T);
  // a's first two tokens once, then each reader from a's last token; b likewise; c alone; b's second row
  // is its prompt only (its last token, reading b's prefix).
  const std::vector<int64_t> from = {0, 1, 2, 3, 4, 6, 7, 8, 14, 15, 18, 19, 20, 25};
  EXPECT_EQ(p.from, from);
  struct S {
    int64_t start, len, prefix_start, prefix_len;
  };
  const std::vector<S> want = {{0, 2, 0, 0}, {2, 3, 0, 2}, {5, 1, 0, 0}, {6, 2, 5, 1}, {8, 2, 0, 2}, {10, 3, 0, 0}, {13, 1, 5, 1}};
  ASSERT_EQ(p.segs.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(p.segs[i].start, want[i].start) << i;
    EXPECT_EQ(p.segs[i].len, want[i].len) << i;
    EXPECT_EQ(p.segs[i].prefix_len, want[i].prefix_len) << i;
    if (want[i].prefix_len > 0) {
      EXPECT_EQ(p.segs[i].prefix_start, want[i].prefix_start) << i;
    }
  }
  EXPECT_EQ(p.shared_rows, 4);
  std::vector<int32_t> tok(30), got;
  for (int32_t i = 0; i < 30; ++i) tok[static_cast<size_t>(i)] = 100 + i;
  p.gather(tok.data(), &got);
  EXPECT_EQ(got[5], 106);
  EXPECT_THROW(pack_rows({&a}, {7}, T), Error);  // longer than the stride
  EXPECT_THROW(pack_rows({&a}, {2}, T), Error);  // shorter than its prompt
}

TEST(RlTrainer, SharedPromptsGiveThePaddedUpdateWithFewerPositions) {
  // Each group's prompt held once in the update (and no padding) gives the padded update's loss and
  // gradient, for whole mini-batches and micro-batches, rows of mixed lengths.
  // With a KL term, the reference model's log-probs come from packed rows too.
  for (int64_t micro : {0, 5}) {
    std::vector<std::vector<float>> grads;
    std::vector<double> loss, positions, kl;
    for (bool share : {false, true}) {
      RlSetup s;
      Transformer reference(s.cfg);
      reference.init_random(4, 0.05f);  // another model, so the KL term is not zero
      RlConfig c = config();
      c.micro_batch = micro;
      c.share_prompts = share;
      c.loss.kl_coef = micro == 5 ? 0.5 : 0.0;
      PromptCodec pc = codec();
      for (int32_t id = 0; id < 40; ++id) pc.stop_ids.insert(id);
      RlTrainer t(s.model, s.task, pc, c, s.safe, {}, &reference);
      Metrics m = t.step();
      loss.push_back(value(m, "loss"));
      positions.push_back(value(m, "train_positions"));
      kl.push_back(value(m, "kl"));
      grads.emplace_back(s.model.grads(), s.model.grads() + s.model.flat_size());
    }
    if (micro == 5) {
      EXPECT_GT(kl[0], 1e-3);
      EXPECT_NEAR(kl[0], kl[1], 1e-5 * kl[0]);
    }
    double worst = 0, scale = 0;
    for (size_t i = 0; i < grads[0].size(); ++i) {
      worst = std::max(worst, double(std::fabs(grads[0][i] - grads[1][i])));
      scale = std::max(scale, double(std::fabs(grads[0][i])));
    }
    EXPECT_GT(scale, 1e-4);
    EXPECT_LT(worst, 1e-5 * scale) << "micro " << micro;
    EXPECT_NEAR(loss[0], loss[1], 1e-6);  // the loss sums advantage-weighted log-probs that nearly cancel
    EXPECT_LT(positions[1], 0.9 * positions[0]) << "micro " << micro;
  }
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

TEST(RlTrainer, ReusedRolloutActivationsGiveTheSameUpdate) {
  // rl.reuse_activations: the first optimizer step's micro-batches take the rollout's activations
  // (no forward); later epochs run the forward (new weights). Same loss, gradient and weights as
  // without, with plain and with speculative rollouts.
  for (bool spec : {false, true}) {
    std::vector<std::vector<float>> params, grads;
    std::vector<double> loss, positions, reused;
    for (bool reuse : {false, true}) {
      RlSetup s;
      RlConfig c = config();
      c.micro_batch = 5;
      c.epochs = 2;
      c.reuse_activations = reuse;
      if (spec) {
        SpeculativeConfig sp;
        sp.control.toggle = rollout::SpecToggle::always;
        sp.group = 32;
        c.speculative = sp;
      }
      RlTrainer t(s.model, s.task, codec(), c, s.safe);
      Metrics m = t.step();
      loss.push_back(value(m, "loss"));
      positions.push_back(value(m, "train_positions"));
      reused.push_back(value(m, "reused_positions"));
      params.emplace_back(s.model.params(), s.model.params() + s.model.flat_size());
      grads.emplace_back(s.model.grads(), s.model.grads() + s.model.flat_size());
    }
    EXPECT_EQ(reused[0], 0);
    EXPECT_EQ(reused[1] * 2, positions[1]) << "spec " << spec;  // all of epoch 1, none of epoch 2
    EXPECT_NEAR(loss[0], loss[1], 1e-6);
    double worst = 0, scale = 0, pworst = 0;
    for (size_t i = 0; i < grads[0].size(); ++i) {
      worst = std::max(worst, double(std::fabs(grads[0][i] - grads[1][i])));
      scale = std::max(scale, double(std::fabs(grads[0][i])));
      pworst = std::max(pworst, double(std::fabs(params[0][i] - params[1][i])));
    }
    EXPECT_GT(scale, 1e-4);
    EXPECT_LT(worst, 1e-4 * scale) << "spec " << spec;
    // Adam's first steps move a weight by ~lr g / (|g| + eps) whatever |g| is: for near-zero gradients
    // the summation-order rounding shows at a few percent of lr (3e-3 here).
    EXPECT_LT(pworst, 0.05 * 3e-3) << "spec " << spec;
  }
}

TEST(RlTrainer, MicroBatchesWithoutGradientSkipTheBackwardAndGiveTheSameUpdate) {
  // Groups whose rewards are all equal have advantage 0 on every token: their micro-batches compute log-probs
  // and entropies only (rl.skip_no_gradient). The metrics, the gradient and the weights equal the run that
  // backpropagates those zeros, with the rollout's activations reused (epoch 1) and with a forward (epoch 2),
  // and with an entropy term nothing is skipped.
  for (double ent : {0.0, 0.01}) {
    std::vector<std::vector<float>> params, grads;
    std::vector<double> loss, entropy, skipped, positions;
    for (bool skip : {false, true}) {
      RlSetup s;
      s.task->uniform_ = true;
      RlConfig c = config();
      c.micro_batch = c.group_size;
      c.epochs = 2;
      c.loss.ent_coef = ent;
      c.loss.skip_no_gradient = skip;
      RlTrainer t(s.model, s.task, codec(), c, s.safe);
      Metrics m = t.step();
      loss.push_back(value(m, "loss"));
      entropy.push_back(value(m, "entropy"));
      skipped.push_back(value(m, "no_gradient_positions"));
      positions.push_back(value(m, "train_positions"));
      params.emplace_back(s.model.params(), s.model.params() + s.model.flat_size());
      grads.emplace_back(s.model.grads(), s.model.grads() + s.model.flat_size());
    }
    EXPECT_EQ(skipped[0], 0);
    if (ent == 0) {
      EXPECT_GT(skipped[1], 0);             // at least one uniform group, in both epochs
      EXPECT_LT(skipped[1], positions[1]);  // and groups with a gradient
    } else {
      EXPECT_EQ(skipped[1], 0) << "an entropy term has a gradient everywhere";
    }
    EXPECT_EQ(loss[0], loss[1]);
    EXPECT_EQ(entropy[0], entropy[1]);
    double scale = 0;
    for (size_t i = 0; i < grads[0].size(); ++i) scale = std::max(scale, double(std::fabs(grads[0][i])));
    EXPECT_GT(scale, 1e-4);
    EXPECT_EQ(grads[0], grads[1]) << "adding the skipped zeros changes no bit";
    EXPECT_EQ(params[0], params[1]);
  }
}

TEST(RlTrainer, OverlongMaskingLeavesTruncatedCompletionsOutOfTheLoss) {
  // DAPO's overlong masking (rl.mask_truncated): a completion cut at max_new has loss mask 0 on every token, one
  // that stopped has 1; without the option every token counts. The loss's token count follows.
  std::vector<double> tokens;
  for (bool mask : {false, true}) {
    RlSetup s;
    RlConfig c = config();
    c.mask_truncated = mask;
    PromptCodec pc = codec();
    for (int32_t id = 0; id < 8; ++id) pc.stop_ids.insert(id);  // some completions stop, some run to max_new
    RlTrainer t(s.model, s.task, pc, c, s.safe);
    Metrics m = t.step();
    tokens.push_back(value(m, "train_tokens"));
    int64_t cut = 0, stopped = 0, counted = 0;
    for (const Trajectory& x : t.last_batch().traj) {
      const bool truncated = x.finish == rollout::FinishReason::length;
      (truncated ? cut : stopped) += 1;
      for (float v : x.loss_mask) {
        EXPECT_EQ(v, mask && truncated ? 0.f : 1.f);
        counted += v != 0;
      }
    }
    EXPECT_GT(cut, 0);
    EXPECT_GT(stopped, 0);
    EXPECT_EQ(tokens.back(), static_cast<double>(counted));
  }
  EXPECT_LT(tokens[1], tokens[0]);
}

// The RL step on every newer family: with shared prompts, micro-batches and the rollout's activations reused (the
// store holds Gemma's extra fields; packed rows attend through windows and soft-caps), the update equals the one
// computed by a forward; and GRPO raises the reward on a Gemma-2-shaped model.
TEST(RlTrainer, EveryFamilyReusesItsRolloutActivationsAndLearns) {
  for (Arch arch : {Arch::mistral, Arch::gemma2, Arch::gemma3, Arch::phi3}) {
    std::vector<std::vector<float>> grads;
    std::vector<double> loss, reused;
    for (bool reuse : {false, true}) {
      RlSetup s(test::family_config(arch, 64), 3);
      RlConfig c = config();
      c.micro_batch = 5;
      c.share_prompts = true;
      c.reuse_activations = reuse;
      RlTrainer t(s.model, s.task, codec(), c, s.safe);
      Metrics m = t.step();
      loss.push_back(value(m, "loss"));
      reused.push_back(value(m, "reused_positions"));
      grads.emplace_back(s.model.grads(), s.model.grads() + s.model.flat_size());
    }
    EXPECT_GT(reused[1], 0) << arch_name(arch);
    EXPECT_NEAR(loss[0], loss[1], 1e-6) << arch_name(arch);
    double worst = 0, scale = 0;
    for (size_t i = 0; i < grads[0].size(); ++i) {
      worst = std::max(worst, double(std::fabs(grads[0][i] - grads[1][i])));
      scale = std::max(scale, double(std::fabs(grads[0][i])));
    }
    EXPECT_GT(scale, 1e-4) << arch_name(arch);
    EXPECT_LT(worst, 1e-4 * scale) << arch_name(arch);
  }
  RlSetup s(test::family_config(Arch::gemma2, 64), 3);
  RlTrainer t(s.model, s.task, codec(), config(), s.safe);
  std::vector<double> r;
  for (int i = 0; i < 30; ++i) r.push_back(value(t.step(), "reward_mean"));
  const double first = (r[0] + r[1] + r[2]) / 3, last = (r[27] + r[28] + r[29]) / 3;
  std::printf("gemma2-shaped reward: first 3 steps %.3f, last 3 steps %.3f\n", first, last);
  EXPECT_GT(last, first + 0.2);
}
