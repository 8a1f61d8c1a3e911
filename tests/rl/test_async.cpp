// [rl.async] (rl/async_config.h) on the RL tests' tiny model and letters task: max_staleness = 0 is the
// synchronous loop bitwise; with 1, step k's batch is exactly what the rollout engine samples with the weights
// after update k - 1 (tokens and log-probs bitwise) and every trajectory carries that version; reruns and
// thread splits give the same bits; a run resumed from the async state equals the uninterrupted one; the loss
// weights stale samples by the truncated importance ratio (in the loss with one optimiser step and no methods,
// through a proximal pass otherwise, which methods' hooks then read); rollout hooks are refused; the state text
// round-trips; GRPO still learns. With [lora] (on an f32, bf16 or int4 base): step k is sampled with the adapters
// after update k - 1 on the unchanged base, max_staleness = 0 is the synchronous loop bitwise and a resumed run
// equals the uninterrupted one. With [env] (the built-in guessing game, conversations of up to three turns): step
// k's conversations are those an environment rollout on version k - 1 holds (their recorded log-probs within 1e-5 of
// version k - 1's teacher-forced ones, off version k's), a resumed run equals the uninterrupted one, dynamic
// sampling's extra rounds converse on the trainer's thread with the current weights, and max_staleness = 0 is the
// synchronous loop bitwise.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <deque>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "rl/guess_game.h"
#include "rl/letter_task.h"
#include "rl/trainer_snapshot.h"
#include "temper/core/error.h"
#include "temper/core/rng.h"
#include "temper/core/thread_pool.h"
#include "temper/env/guessing_env.h"
#include "temper/model/lora.h"
#include "temper/rl/async_state.h"
#include "temper/rl/env_rollout.h"
#include "temper/rl/policy_loss.h"
#include "temper/rl/rl_trainer.h"
#include "temper/rl/scorer.h"
#include "temper/rollout/pooled_engine.h"

using namespace temper;
using namespace temper::rl;
using namespace temper::test;

namespace {

RlConfig async_config(int64_t staleness) {
  RlConfig c = config();
  c.async = AsyncConfig{};
  c.async->max_staleness = staleness;
  return c;
}

std::vector<float> params_of(Transformer& m) {
  return std::vector<float>(m.params(), m.params() + m.flat_size());
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// The run's per-step numbers that must repeat exactly.
std::vector<double> trace(const Metrics& m) {
  return {value(m, "reward_mean"), value(m, "loss"), value(m, "grad_norm"), value(m, "ratio_mean")};
}

// Step k's round-0 requests as the trainer draws them (problems k * prompts_per_step on, streams of (seed, k, 0)).
std::vector<rollout::RolloutRequest> step_requests(const RlSetup& s, const RlConfig& c, int64_t k) {
  const PromptCodec pc = codec();
  std::vector<rollout::RolloutRequest> reqs;
  const uint64_t seed = mix_seed(mix_seed(c.seed, static_cast<uint64_t>(k)), 0);
  for (int64_t i = 0; i < c.prompts_per_step; ++i) {
    tasks::Problem p = s.task->problem(tasks::Split::train, static_cast<uint64_t>(k * c.prompts_per_step + i));
    reqs.push_back(rollout::make_request(pc.encode_prompt(p), c.group_size, c.max_new, s.cfg.max_position_embeddings,
                                         c.sampler, pc.stop_ids, seed, static_cast<uint64_t>(i * c.group_size)));
  }
  return reqs;
}

// [lora] on the tiny model: rank-4 adapters on all seven products, B drawn N(0, 0.05) so that version 0 already
// moves the model off its base, on a base held as `base`. The base's weights are RlSetup's (seed 3) whatever
// adapter_seed is.
struct LoraRl {
  static LoraConfig lora_config(LoraBase base) {
    LoraConfig c;
    c.rank = 4, c.alpha = 8, c.base = base;
    c.targets = {LoraTarget::q,    LoraTarget::k,  LoraTarget::v,   LoraTarget::o,
                 LoraTarget::gate, LoraTarget::up, LoraTarget::down};
    return c;
  }
  explicit LoraRl(LoraBase base, uint64_t adapter_seed = 11) : ad(s.cfg, lora_config(base)) {
    ad.init(adapter_seed);
    for (int64_t l = 0; l < s.cfg.num_layers; ++l)
      for (LoraTarget t : ad.config().targets) {
        Tensor b = ad.b(l, t);
        rng_fill_normal(adapter_seed + 1, static_cast<uint64_t>(l * kLoraTargetCount + static_cast<int>(t)),
                        std::span<float>(b.data<float>(), static_cast<size_t>(b.numel())), 0.f, 0.05f);
      }
    s.model.attach_lora(&ad);
  }
  std::vector<float> adapters() const { return std::vector<float>(ad.params(), ad.params() + ad.size()); }
  void set_adapters(const std::vector<float>& a) { std::copy(a.begin(), a.end(), ad.params()); }
  RlSetup s;
  LoraAdapters ad;
};

// The log-probs of each trajectory's completion under `m` (its adapters as they are), teacher-forced: the scorer's
// batch pass (rl/scorer.h, what the proximal pass runs), every row in one unpacked forward.
std::vector<std::vector<float>> completion_logprobs(Transformer& m, const std::vector<Trajectory>& ts) {
  std::vector<std::vector<int32_t>> prompts, tokens;
  for (const Trajectory& t : ts) prompts.push_back(t.prompt), tokens.push_back(t.tokens);
  Scorer scorer(m, nullptr, std::max<int64_t>(1, static_cast<int64_t>(ts.size())), false);
  std::vector<std::vector<float>> out;
  scorer.score_batch(prompts, tokens, false, out, nullptr);
  return out;
}

double max_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double d = a.size() == b.size() ? 0 : INFINITY;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) d = std::max(d, std::fabs(double(a[i]) - double(b[i])));
  return d;
}

}  // namespace

TEST(Async, ZeroStalenessIsTheSynchronousLoopBitwise) {
  std::vector<std::vector<float>> params;
  std::vector<std::vector<double>> traces;
  for (bool section : {false, true}) {
    RlSetup s;
    RlTrainer t(s.model, s.task, codec(), section ? async_config(0) : config(), s.safe);
    std::vector<double> tr;
    for (int i = 0; i < 3; ++i) {
      Metrics m = t.step();
      for (double x : trace(m)) tr.push_back(x);
      for (const Trajectory& x : t.last_batch().traj) EXPECT_EQ(x.version, i);
    }
    traces.push_back(tr);
    params.push_back(params_of(s.model));
  }
  EXPECT_EQ(traces[0], traces[1]);
  EXPECT_TRUE(same_bits(params[0], params[1]));
}

TEST(Async, StepKIsSampledWithTheWeightsAfterUpdateKMinus1) {
  RlSetup s;
  const RlConfig c = async_config(1);
  RlTrainer t(s.model, s.task, codec(), c, s.safe);
  std::vector<std::vector<float>> versions{params_of(s.model)};  // versions[v]: the weights after v updates
  const PromptCodec pc = codec();
  for (int64_t k = 0; k < 4; ++k) {
    Metrics m = t.step();
    versions.push_back(params_of(s.model));
    const int64_t v = std::max<int64_t>(k - 1, 0);
    EXPECT_EQ(value(m, "async_staleness"), static_cast<double>(k - v)) << "step " << k;
    // The same requests on a model holding version v, through an engine like the explorer's.
    Transformer ref(s.cfg);
    std::copy(versions[static_cast<size_t>(v)].begin(), versions[static_cast<size_t>(v)].end(), ref.params());
    ref.params_updated();
    rollout::PooledEngine engine(ref, c.kv_memory_mb,
                                 rollout::EngineConfig{c.prompts_per_step * c.group_size, pc.token_bytes}, "kv");
    const std::vector<rollout::RolloutRequest> reqs = step_requests(s, c, k);
    std::vector<rollout::Completion> want = engine.engine().run(reqs);
    if (k > 0) {  // the trainer's own weights at step k (version k) sample other log-probs: the check can tell
      std::copy(versions[static_cast<size_t>(k)].begin(), versions[static_cast<size_t>(k)].end(), ref.params());
      ref.params_updated();
      std::vector<rollout::Completion> fresh = engine.engine().run(reqs);
      bool differ = false;
      for (size_t i = 0; i < fresh.size() && !differ; ++i) differ = fresh[i].sample_logprob != want[i].sample_logprob;
      EXPECT_TRUE(differ) << "step " << k;
    }
    const std::vector<Trajectory>& got = t.last_batch().traj;
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_EQ(got[i].version, v);
      EXPECT_EQ(got[i].tokens, want[i].tokens) << "step " << k << " sequence " << i;
      EXPECT_EQ(0, std::memcmp(got[i].sample_logprob.data(), want[i].sample_logprob.data(),
                               want[i].sample_logprob.size() * sizeof(float)));
    }
  }
  // The explorer ran ahead: the trainer holds version 4, and step 4's problems (16..19) are drawn already.
  EXPECT_EQ(t.cursor(), 20u);
  EXPECT_FALSE(same_bits(versions[1], versions[2]));  // the versions really differ
}

TEST(Async, RerunsAndThreadSplitsGiveTheSameBits) {
  std::vector<std::vector<float>> params;
  std::vector<std::vector<double>> traces;
  for (int64_t threads : {1, 2, 1}) {
    RlSetup s;
    RlConfig c = async_config(1);
    c.async->explorer_threads = threads;
    c.async->trainer_threads = threads;
    RlTrainer t(s.model, s.task, codec(), c, s.safe);
    std::vector<double> tr;
    for (int i = 0; i < 4; ++i)
      for (double x : trace(t.step())) tr.push_back(x);
    traces.push_back(tr);
    params.push_back(params_of(s.model));
  }
  for (size_t r = 1; r < params.size(); ++r) {
    EXPECT_EQ(traces[0], traces[r]) << "run " << r;
    EXPECT_TRUE(same_bits(params[0], params[r])) << "run " << r;
  }
}

// Work between steps (held-out evaluation) runs under the trainer's moving share: none without an explorer thread;
// with one, every core while the explorer has no job (before the first step, and once its job in flight is done).
TEST(Async, TheTrainersShareOfTheCoresIsThereBetweenSteps) {
  struct Restore {
    int threads = num_threads();
    ~Restore() { set_num_threads(threads); }
  } restore;
  set_num_threads(2);
  {
    RlSetup sync_setup;
    RlTrainer sync(sync_setup.model, sync_setup.task, codec(), config(), sync_setup.safe);
    EXPECT_EQ(sync.trainer_threads(), nullptr);
    RlSetup s;
    RlConfig c = async_config(1);
    c.async->explorer_threads = 1;
    c.async->trainer_threads = 1;
    RlTrainer t(s.model, s.task, codec(), c, s.safe);
    ASSERT_NE(t.trainer_threads(), nullptr);
    EXPECT_EQ(t.trainer_threads()->load(), 2) << "no job yet: the trainer has both cores";
    t.step();  // launches step 1's job on the explorer thread
    const int during = t.trainer_threads()->load();
    EXPECT_TRUE(during == 1 || during == 2) << during;  // its share while the job runs, both once it is done
    EXPECT_FALSE(t.async_state().empty());              // waits for the job
    EXPECT_EQ(t.trainer_threads()->load(), 2) << "the explorer's job done: both cores back";
  }
}

TEST(Async, AResumedRunEqualsTheUninterruptedOne) {
  for (int64_t staleness : {1, 2}) {
    const RlConfig c = async_config(staleness);
    RlSetup whole;
    {
      RlTrainer t(whole.model, whole.task, codec(), c, whole.safe);
      t.set_planned_steps(5);
      for (int i = 0; i < 5; ++i) t.step();
    }
    // Two steps, a "checkpoint" (weights, moments, counters, the explored batches' text), a fresh process.
    RlSetup first;
    TrainerSnapshot snap;
    {
      RlTrainer t(first.model, first.task, codec(), c, first.safe);
      t.set_planned_steps(5);
      for (int i = 0; i < 2; ++i) t.step();
      snap = TrainerSnapshot::take(first.model, t);
    }
    EXPECT_FALSE(snap.async_state.empty());
    RlSetup second(99);  // other starting weights: everything comes from the checkpoint
    RlTrainer t(second.model, second.task, codec(), c, second.safe);
    t.set_planned_steps(5);
    snap.restore(second.model, t);
    for (int i = 2; i < 5; ++i) t.step();
    EXPECT_TRUE(same_bits(params_of(whole.model), params_of(second.model))) << "max_staleness " << staleness;
  }
}

TEST(Async, LoraStepKIsSampledWithTheAdaptersOfVersionKMinus1) {
  for (LoraBase base : {LoraBase::f32, LoraBase::bf16, LoraBase::int4, LoraBase::nf4}) {
    SCOPED_TRACE(std::string("lora.base ") + std::string(lora_base_name(base)));
    LoraRl f(base);
    const std::vector<float> base_weights = params_of(f.s.model);
    const RlConfig c = async_config(1);
    RlTrainer t(f.s.model, f.s.task, codec(), c, f.s.safe);
    t.optimizer().train_adapters(&f.ad);
    std::vector<std::vector<float>> versions{f.adapters()};  // versions[v]: the adapters after v updates
    // A policy of the same base holding each version's adapters in turn, through an engine like the explorer's.
    LoraRl ref(base);
    rollout::PooledEngine engine(ref.s.model, c.kv_memory_mb,
                                 rollout::EngineConfig{c.prompts_per_step * c.group_size, codec().token_bytes}, "kv");
    for (int64_t k = 0; k < 4; ++k) {
      const Metrics m = t.step();
      versions.push_back(f.adapters());
      const int64_t v = std::max<int64_t>(k - 1, 0);
      EXPECT_EQ(value(m, "async_staleness"), static_cast<double>(k - v)) << "step " << k;
      const std::vector<rollout::RolloutRequest> reqs = step_requests(f.s, c, k);
      ref.set_adapters(versions[static_cast<size_t>(v)]);
      const std::vector<rollout::Completion> want = engine.engine().run(reqs);
      const std::vector<Trajectory>& got = t.last_batch().traj;
      ASSERT_EQ(got.size(), want.size());
      // The behaviour log-probs the loss divides by are version v's (base + adapters, unmerged), not the base's.
      const std::vector<std::vector<float>> with_v = completion_logprobs(ref.s.model, got);
      std::vector<std::vector<float>> base_alone;
      {
        BaseOnly no_adapters(ref.s.model);
        base_alone = completion_logprobs(ref.s.model, got);
      }
      double to_version = 0, to_base = 0;
      for (size_t i = 0; i < got.size(); ++i) {
        EXPECT_EQ(got[i].version, v);
        EXPECT_EQ(got[i].tokens, want[i].tokens) << "step " << k << " sequence " << i;
        EXPECT_EQ(0, std::memcmp(got[i].sample_logprob.data(), want[i].sample_logprob.data(),
                                 want[i].sample_logprob.size() * sizeof(float)));
        to_version = std::max(to_version, max_diff(with_v[i], got[i].old_logprob));
        to_base = std::max(to_base, max_diff(base_alone[i], got[i].old_logprob));
      }
      EXPECT_LT(to_version, 1e-5) << "step " << k;
      EXPECT_GT(to_base, 1e-3) << "step " << k;
      if (k > 0) {  // the trainer's own adapters at step k (version k) sample other log-probs: the check can tell
        ref.set_adapters(versions[static_cast<size_t>(k)]);
        const std::vector<rollout::Completion> fresh = engine.engine().run(reqs);
        bool differ = false;
        for (size_t i = 0; i < fresh.size() && !differ; ++i) differ = fresh[i].sample_logprob != want[i].sample_logprob;
        EXPECT_TRUE(differ) << "step " << k;
      }
    }
    EXPECT_TRUE(same_bits(base_weights, params_of(f.s.model)));  // only the adapters trained
    EXPECT_FALSE(same_bits(versions[1], versions[2]));
  }
}

TEST(Async, LoraZeroStalenessIsTheSynchronousLoopBitwise) {
  std::vector<std::vector<float>> adapters;
  std::vector<std::vector<double>> traces;
  for (bool section : {false, true}) {
    LoraRl f(LoraBase::int4);
    RlTrainer t(f.s.model, f.s.task, codec(), section ? async_config(0) : config(), f.s.safe);
    t.optimizer().train_adapters(&f.ad);
    std::vector<double> tr;
    for (int i = 0; i < 3; ++i)
      for (double x : trace(t.step())) tr.push_back(x);
    traces.push_back(tr);
    adapters.push_back(f.adapters());
  }
  EXPECT_EQ(traces[0], traces[1]);
  EXPECT_TRUE(same_bits(adapters[0], adapters[1]));
  EXPECT_FALSE(same_bits(adapters[0], LoraRl(LoraBase::int4).adapters()));  // they trained
}

TEST(Async, LoraAResumedRunEqualsTheUninterruptedOne) {
  const RlConfig c = async_config(1);
  LoraRl whole(LoraBase::bf16);
  {
    RlTrainer t(whole.s.model, whole.s.task, codec(), c, whole.s.safe);
    t.optimizer().train_adapters(&whole.ad);
    t.set_planned_steps(5);
    for (int i = 0; i < 5; ++i) t.step();
  }
  LoraRl first(LoraBase::bf16);
  TrainerSnapshot snap;
  {
    RlTrainer t(first.s.model, first.s.task, codec(), c, first.s.safe);
    t.optimizer().train_adapters(&first.ad);
    t.set_planned_steps(5);
    for (int i = 0; i < 2; ++i) t.step();
    snap = TrainerSnapshot::take(first.s.model, t, &first.ad);
  }
  EXPECT_FALSE(snap.async_state.empty());
  LoraRl second(LoraBase::bf16, 99);  // other starting adapters: they come from the checkpoint, the base from the model
  RlTrainer t(second.s.model, second.s.task, codec(), c, second.s.safe);
  t.optimizer().train_adapters(&second.ad);
  t.set_planned_steps(5);
  snap.restore(second.s.model, t, &second.ad);
  for (int i = 2; i < 5; ++i) t.step();
  EXPECT_TRUE(same_bits(whole.adapters(), second.adapters()));
  EXPECT_FALSE(same_bits(whole.adapters(), first.adapters()));  // three more steps moved them
}

TEST(Async, StaleSamplesAreWeightedByTheTruncatedImportanceRatio) {
  // One optimiser step: the loss with old_logp = the behaviour policy's log-probs and behaviour_cap equals the
  // ordinary loss at ratio 1 (old_logp = the forward's own) with the weight times min(pi / pi_behaviour, cap).
  const std::vector<float> lp = {-1.0f, -2.0f, -0.5f, -3.0f}, behaviour = {-1.2f, -1.0f, -0.5f, -4.0f};
  const std::vector<float> adv = {1.0f, -0.5f, 2.0f, 0.7f}, weight = {1.0f, 0.5f, 1.0f, 2.0f}, scale(4, 0.25f);
  PolicyLossConfig stale;
  stale.behaviour_cap = 2.0;
  PolicyLossBatch sb;
  sb.old_logp = behaviour.data(), sb.advantage = adv.data(), sb.weight = weight.data(), sb.scale = scale.data();
  sb.N = 4;
  std::vector<float> rho_w(4);
  for (size_t n = 0; n < 4; ++n) rho_w[n] = weight[n] * std::min(std::exp(lp[n] - behaviour[n]), 2.0f);
  PolicyLossBatch ob = sb;
  ob.old_logp = lp.data(), ob.weight = rho_w.data();
  PolicyLoss a(stale, sb), b(PolicyLossConfig{}, ob);
  for (int64_t n = 0; n < 4; ++n) {
    float ga = 0, gb = 0, ea = 0, eb = 0;
    a.coefs(n, lp[static_cast<size_t>(n)], 0.f, &ga, &ea);
    b.coefs(n, lp[static_cast<size_t>(n)], 0.f, &gb, &eb);
    EXPECT_NEAR(ga, gb, 1e-7) << n;
  }
  const PolicyLossStats sa = policy_loss_forward(stale, sb, lp.data(), nullptr);
  const PolicyLossStats so = policy_loss_forward(PolicyLossConfig{}, ob, lp.data(), nullptr);
  EXPECT_NEAR(sa.loss, so.loss, 1e-7);
  EXPECT_NE(sa.loss, policy_loss_forward(PolicyLossConfig{}, sb, lp.data(), nullptr).loss);  // it does differ
  EXPECT_EQ(sa.clipped_high, 1);  // token 3: exp(1) > 2 was truncated
  EXPECT_NEAR(sa.mean_ratio(), (std::exp(0.2) + std::exp(-1.0) + 1.0 + std::exp(1.0)) / 4, 1e-6);
}

TEST(Async, SeveralOptimiserStepsTakeTheProximalPass) {
  RlSetup s;
  RlConfig c = async_config(1);
  c.mini_batches = 2;
  RlTrainer t(s.model, s.task, codec(), c, s.safe);
  std::vector<double> is;
  for (int i = 0; i < 3; ++i) {
    Metrics m = t.step();
    is.push_back(value(m, "async_is_mean"));
    EXPECT_EQ(value(m, "updates"), 2);
  }
  // Step 0's batch was sampled with the current weights: pi_prox / pi_behaviour is 1 up to the passes' rounding.
  // Steps 1 and 2 sampled one update earlier (lr 3e-3): the ratio moves off 1.
  EXPECT_NEAR(is[0], 1.0, 1e-4);
  EXPECT_GT(std::fabs(is[1] - 1.0), 1e-3);
  EXPECT_GT(std::fabs(is[2] - 1.0), 1e-3);
}

namespace {

// A method that reads old_logprob in its advantage hook (as RCSD's student and STARE's gate do): records how far it
// is from the current weights' log-probs and from the behaviour policy's.
class LogprobReader : public Method {
 public:
  std::string name() const override { return "reader"; }
  void attach(const MethodEnv& env) override { env_ = env; }
  bool advantages(Batch& b) override {
    std::vector<std::vector<int32_t>> prompts, tokens;
    for (const Trajectory& t : b.traj) prompts.push_back(t.prompt), tokens.push_back(t.tokens);
    std::vector<std::vector<float>> lp;
    env_.score_batch(prompts, tokens, false, lp, nullptr);
    to_current = 0, weight_off = 0;
    for (size_t i = 0; i < b.traj.size(); ++i)
      for (size_t k = 0; k < lp[i].size(); ++k) {
        to_current = std::max(to_current, double(std::fabs(lp[i][k] - b.traj[i].old_logprob[k])));
        weight_off = std::max(weight_off, double(std::fabs(b.traj[i].weight[k] - 1.f)));
      }
    return false;
  }
  MethodEnv env_;
  double to_current = -1, weight_off = -1;
};

}  // namespace

TEST(Async, MethodsSeeTheProximalLogprobs) {
  // With a method on, the proximal pass runs before its hooks: old_logprob is the current weights' (what a method
  // such as RCSD reads as the student's), the truncated importance weight is in the token weights.
  RlSetup s;
  LogprobReader r;
  RlTrainer t(s.model, s.task, codec(), async_config(1), s.safe, {&r});
  for (int i = 0; i < 3; ++i) {
    Metrics m = t.step();
    EXPECT_LT(r.to_current, 1e-6) << "step " << i;
    if (i > 0) {
      EXPECT_GT(r.weight_off, 1e-4) << "step " << i;  // stale samples are reweighted
      EXPECT_GT(std::fabs(value(m, "async_is_mean") - 1.0), 1e-4);
    }
  }
}

namespace {

// A method that steers decoding (as DRE online and GraphPO step-wise do).
class HookMethod : public Method, public rollout::RolloutHook {
 public:
  std::string name() const override { return "steerer"; }
  rollout::RolloutHook* rollout_hook(const RolloutRound&) override { return this; }
  rollout::HookDecision after_token(const rollout::RolloutRequest&, const rollout::Completion&) override { return {}; }
};

}  // namespace

TEST(Async, MethodsThatSteerDecodingAreRefused) {
  RlSetup s;
  HookMethod h;
  RlTrainer t(s.model, s.task, codec(), async_config(1), s.safe, {&h});
  try {
    t.step();
    FAIL() << "expected a refusal";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("'steerer'"), std::string::npos) << what;
    EXPECT_NE(what.find("rollout hook"), std::string::npos) << what;
  }
  RlTrainer sync(s.model, s.task, codec(), async_config(0), s.safe, {&h});
  EXPECT_NO_THROW(sync.step());  // the synchronous loop runs it
  RlConfig bad = async_config(1);
  bad.async->tis_cap = 0.5;
  EXPECT_THROW(bad.validate(), Error);
}

TEST(Async, TheStateTextRoundTrips) {
  ExploredBatch b;
  b.step = 7, b.version = 6;
  tasks::Problem p;
  p.id = "x/1", p.prompt = "what?", p.messages = {{"user", "hi"}}, p.answer = "42", p.gold_solution = "#### 42";
  p.teacher_response = "t", p.rubric = "r", p.difficulty = 3, p.index = 11, p.asked = "asked", p.modules = {"m"};
  p.user = "u", p.history = {"h1", "h2"}, p.context = "c", p.row = std::make_shared<const std::string>("{\"a\":1}");
  b.problems = {p, tasks::Problem{}};
  b.prompts = {{1, 2, 3}, {4}};
  rollout::Completion c;
  c.request = 1, c.member = 2, c.tokens = {5, 6}, c.sample_logprob = {-0.5f, -0.25f}, c.policy_logprob = {-1, -2};
  c.entropy = {0.1f, 0.2f}, c.finish = rollout::FinishReason::stop;
  b.done = {c};
  const std::deque<ExploredBatch> back = decode_explored(encode_explored({b}));
  ASSERT_EQ(back.size(), 1u);
  const ExploredBatch& r = back[0];
  EXPECT_EQ(r.step, 7);
  EXPECT_EQ(r.version, 6);
  ASSERT_EQ(r.problems.size(), 2u);
  const tasks::Problem& q = r.problems[0];
  EXPECT_EQ(q.id + q.prompt + q.messages[0].content + q.answer + q.gold_solution + q.teacher_response + q.rubric +
                q.asked + q.modules[0] + q.user + q.history[1] + q.context + *q.row,
            "x/1what?hi42#### 42trasked"
            "mu"
            "h2c{\"a\":1}");
  EXPECT_EQ(q.difficulty, 3);
  EXPECT_EQ(q.index, 11);
  EXPECT_FALSE(r.problems[1].row);
  EXPECT_EQ(r.prompts, b.prompts);
  ASSERT_EQ(r.done.size(), 1u);
  EXPECT_EQ(r.done[0].tokens, c.tokens);
  EXPECT_EQ(r.done[0].sample_logprob, c.sample_logprob);
  EXPECT_EQ(r.done[0].finish, rollout::FinishReason::stop);
  EXPECT_THROW(decode_explored("temper-async-1:abc"), Error);
  EXPECT_THROW(decode_explored("something else"), Error);
  EXPECT_EQ(encode_explored({b}).rfind("temper-async-1:", 0), 0u);  // no conversations: the text as before [env]
  // [env]: a batch of conversations (scored trajectories) and the source's metrics instead of completions.
  ExploredBatch e;
  e.step = 3, e.version = 2, e.problems = {p};
  Trajectory t;
  t.problem = 0, t.group = 0, t.member = 1, t.stratum = 2, t.lineage.parent = 0, t.lineage.fork_pos = 1;
  t.lineage.forced = 1, t.lineage.forced_pos = 2, t.lineage.off_policy = true;
  t.prompt = {7, 8}, t.tokens = {1, 2, 3, 4}, t.sample_logprob = {-1, -2, 0, -3}, t.old_logprob = {-1.5f, -2, 0, -3};
  t.entropy = {1, 2, 0, 3}, t.text = "12 4", t.reward = 0.75, t.rewards = {0.5, 1}, t.reward_terms = {0.25};
  t.reward_components = {{"env.turns", 2}}, t.reward_info = "why", t.correct = true;
  t.finish = rollout::FinishReason::stop, t.tags = {"env"}, t.scored = true, t.appended = {{2, 1}};
  e.conversations = {t};
  e.env_metrics = {{"env/turns", 2.0}, {"env/solved", 0.5}};
  const std::string text = encode_explored({b, e});
  EXPECT_EQ(text.rfind("temper-async-2:", 0), 0u);
  const std::deque<ExploredBatch> two = decode_explored(text);
  ASSERT_EQ(two.size(), 2u);
  EXPECT_EQ(two[0].done.size(), 1u);
  EXPECT_TRUE(two[0].conversations.empty());
  ASSERT_EQ(two[1].conversations.size(), 1u);
  const Trajectory& u = two[1].conversations[0];
  EXPECT_EQ(two[1].step, 3);
  EXPECT_EQ(two[1].env_metrics, e.env_metrics);
  EXPECT_EQ(std::vector<int64_t>({u.problem, u.group, u.member, u.stratum, u.lineage.parent, u.lineage.fork_pos,
                                  u.lineage.forced, u.lineage.forced_pos}),
            std::vector<int64_t>({0, 0, 1, 2, 0, 1, 1, 2}));
  EXPECT_TRUE(u.lineage.off_policy && u.correct && u.scored);
  EXPECT_EQ(u.prompt, t.prompt);
  EXPECT_EQ(u.tokens, t.tokens);
  EXPECT_EQ(u.sample_logprob, t.sample_logprob);
  EXPECT_EQ(u.old_logprob, t.old_logprob);
  EXPECT_EQ(u.entropy, t.entropy);
  EXPECT_EQ(u.text + u.reward_info + u.tags[0], "12 4whyenv");
  EXPECT_EQ(u.reward, 0.75);
  EXPECT_EQ(u.rewards, t.rewards);
  EXPECT_EQ(u.reward_terms, t.reward_terms);
  EXPECT_EQ(u.reward_components, t.reward_components);
  EXPECT_EQ(u.finish, rollout::FinishReason::stop);
  EXPECT_EQ(u.appended, t.appended);
}

TEST(Async, GrpoStillLearnsFromOneStepStaleRollouts) {
  RlSetup s;
  RlTrainer t(s.model, s.task, codec(), async_config(1), s.safe);
  std::vector<double> r;
  for (int i = 0; i < 30; ++i) r.push_back(value(t.step(), "reward_mean"));
  const double first = (r[0] + r[1] + r[2]) / 3, last = (r[27] + r[28] + r[29]) / 3;
  std::printf("async reward: first 3 steps %.3f, last 3 steps %.3f\n", first, last);
  EXPECT_LT(first, 0.2);
  EXPECT_GT(last, first + 0.3);
}

namespace {

// The numbers of a conversation run that must repeat exactly.
std::vector<double> env_trace(const Metrics& m) {
  std::vector<double> v = trace(m);
  v.push_back(value(m, "env/turns"));
  v.push_back(value(m, "env/solved"));
  return v;
}

}  // namespace

TEST(Async, EnvStepKConversesWithTheWeightsAfterUpdateKMinus1) {
  RlSetup s;
  GuessGame g;
  const RlConfig c = GuessGame::config(1);
  std::unique_ptr<RlTrainer> t = g.trainer(s, c);
  std::vector<std::vector<float>> versions{params_of(s.model)};  // versions[v]: the weights after v updates
  // Version v's conversations of step k as the synchronous loop holds them: an environment rollout on a model
  // holding v, through an engine like the explorer's, with step k's problems, seed and group streams.
  Transformer ref(s.cfg);
  rollout::PooledEngine engine(ref, c.kv_memory_mb, rollout::EngineConfig(c.prompts_per_step * c.group_size), "kv");
  env::GuessingEnvironment game(GuessGame::options());
  EnvRollout er(game, GuessGame::codec(), GuessGame::rollout());
  double solved = 0, turns = 0;
  for (int64_t k = 0; k < 4; ++k) {
    const Metrics m = t->step();
    versions.push_back(params_of(s.model));
    const int64_t v = std::max<int64_t>(k - 1, 0);
    EXPECT_EQ(value(m, "async_staleness"), static_cast<double>(k - v)) << "step " << k;
    solved += value(m, "env/solved"), turns += value(m, "env/turns");
    const std::vector<Trajectory>& got = t->last_batch().traj;
    ASSERT_EQ(got.size(), static_cast<size_t>(c.prompts_per_step * c.group_size));
    std::copy(versions[static_cast<size_t>(v)].begin(), versions[static_cast<size_t>(v)].end(), ref.params());
    ref.params_updated();
    std::vector<tasks::Problem> problems;
    for (int64_t i = 0; i < c.prompts_per_step; ++i) {
      const uint64_t idx = static_cast<uint64_t>(k * c.prompts_per_step + i);
      problems.push_back(s.task->problem(tasks::Split::train, idx));
      problems.back().index = static_cast<int64_t>(idx);
    }
    const uint64_t seed = mix_seed(mix_seed(c.seed, static_cast<uint64_t>(k)), 0);
    const rollout::RolloutRequest proto =
        rollout::make_request({0}, c.group_size, c.max_new, s.cfg.max_position_embeddings, c.sampler, {}, seed, 0);
    const std::vector<Trajectory> want =
        er.run(engine.engine(), problems, 0, c.group_size, proto, s.cfg.max_position_embeddings, "ref", 0);
    ASSERT_EQ(want.size(), got.size());
    // The recorded behaviour log-probs of every sampled token are version v's teacher-forced ones (the
    // observations the game appended are not sampled: left out), and version k's are off them after step 0.
    const std::vector<std::vector<float>> with_v = completion_logprobs(ref, got);
    std::copy(versions[static_cast<size_t>(k)].begin(), versions[static_cast<size_t>(k)].end(), ref.params());
    ref.params_updated();
    const std::vector<std::vector<float>> with_k = completion_logprobs(ref, got);
    double to_version = 0, to_current = 0;
    int64_t observed = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      const Trajectory& x = got[i];
      EXPECT_EQ(x.version, v);
      EXPECT_TRUE(x.scored);
      EXPECT_EQ(x.tokens, want[i].tokens) << "step " << k << " conversation " << i;
      EXPECT_EQ(x.reward, want[i].reward) << "step " << k << " conversation " << i;
      EXPECT_EQ(x.appended, want[i].appended) << "step " << k << " conversation " << i;
      std::vector<bool> obs(x.tokens.size(), false);
      for (auto [at, n] : x.appended)
        for (int64_t j = at; j < at + n; ++j) obs[static_cast<size_t>(j)] = true, ++observed;
      for (size_t j = 0; j < x.tokens.size(); ++j) {
        if (obs[j]) {
          EXPECT_EQ(x.loss_mask[j], 0.f);
          continue;
        }
        to_version = std::max(to_version, std::fabs(double(with_v[i][j]) - double(x.old_logprob[j])));
        to_current = std::max(to_current, std::fabs(double(with_k[i][j]) - double(x.old_logprob[j])));
      }
    }
    EXPECT_GT(observed, 0) << "step " << k;  // multi-turn: the game answered
    EXPECT_LT(to_version, 1e-5) << "step " << k;
    if (k > 0) {
      EXPECT_GT(to_current, 1e-4) << "step " << k;
    }
  }
  std::printf("guess game, staleness 1: mean env/solved %.3f, env/turns %.3f over 4 steps\n", solved / 4, turns / 4);
  EXPECT_GT(solved, 0);  // rewards differ within groups: the updates move the weights
  EXPECT_FALSE(same_bits(versions[1], versions[2]));
  EXPECT_EQ(t->cursor(), 20u);  // step 4's problems are drawn already
}

TEST(Async, EnvAResumedRunEqualsTheUninterruptedOne) {
  const RlConfig c = GuessGame::config(1);
  RlSetup whole;
  std::vector<std::vector<double>> want;
  {
    GuessGame g;
    std::unique_ptr<RlTrainer> t = g.trainer(whole, c);
    t->set_planned_steps(5);
    for (int i = 0; i < 5; ++i) want.push_back(env_trace(t->step()));
  }
  RlSetup first;
  TrainerSnapshot snap;
  {
    GuessGame g;
    std::unique_ptr<RlTrainer> t = g.trainer(first, c);
    t->set_planned_steps(5);
    for (int i = 0; i < 2; ++i) t->step();
    snap = TrainerSnapshot::take(first.model, *t);
  }
  EXPECT_EQ(snap.async_state.rfind("temper-async-2:", 0), 0u);  // the batch explored ahead is conversations
  const std::deque<ExploredBatch> held = decode_explored(snap.async_state);
  ASSERT_EQ(held.size(), 1u);
  EXPECT_EQ(held[0].step, 2);
  EXPECT_EQ(held[0].version, 1);
  EXPECT_EQ(held[0].conversations.size(), static_cast<size_t>(c.prompts_per_step * c.group_size));
  EXPECT_FALSE(held[0].env_metrics.empty());
  RlSetup second(99);  // other starting weights: everything comes from the checkpoint
  GuessGame g;
  std::unique_ptr<RlTrainer> t = g.trainer(second, c);
  t->set_planned_steps(5);
  snap.restore(second.model, *t);
  for (int i = 2; i < 5; ++i) EXPECT_EQ(env_trace(t->step()), want[static_cast<size_t>(i)]) << "step " << i;
  EXPECT_TRUE(same_bits(params_of(whole.model), params_of(second.model)));
  EXPECT_FALSE(same_bits(params_of(whole.model), params_of(first.model)));  // three more steps moved them
  // A checkpoint of conversations needs the [env] it was written with.
  RlSetup other;
  RlTrainer plain(other.model, other.task, codec(), c, other.safe);
  EXPECT_THROW(plain.load_async_state(snap.async_state), Error);
}

TEST(Async, EnvDynamicSamplingConversesOnTheTrainersThreadToo) {
  // Round 0 is the explorer's (one version old); the extra rounds converse on the trainer's thread with the current
  // weights, through the same environment source after the explorer's job has released it.
  RlSetup s;
  GuessGame g;
  RlConfig c = GuessGame::config(1);
  c.dynamic_sampling = true;
  std::unique_ptr<RlTrainer> t = g.trainer(s, c);
  int64_t fresh = 0, stale = 0, dropped = 0;
  for (int64_t k = 0; k < 5; ++k) {
    const Metrics m = t->step();
    dropped += static_cast<int64_t>(value(m, "groups_dropped"));
    for (const Trajectory& x : t->last_batch().traj) {
      EXPECT_TRUE(x.version == k || x.version == std::max<int64_t>(k - 1, 0)) << "step " << k;
      if (k > 0) (x.version == k ? fresh : stale) += 1;
    }
  }
  std::printf("dynamic sampling on conversations: %lld groups dropped, %lld fresh and %lld stale trajectories kept\n",
              static_cast<long long>(dropped), static_cast<long long>(fresh), static_cast<long long>(stale));
  EXPECT_GT(dropped, 0);
  EXPECT_GT(fresh, 0);  // extra rounds ran on the trainer's thread
  EXPECT_GT(stale, 0);
}

TEST(Async, EnvZeroStalenessIsTheSynchronousLoopBitwise) {
  std::vector<std::vector<float>> params;
  std::vector<std::vector<double>> traces;
  for (bool section : {false, true}) {
    RlSetup s;
    GuessGame g;
    std::unique_ptr<RlTrainer> t = g.trainer(s, GuessGame::config(section ? std::optional<int64_t>(0) : std::nullopt));
    std::vector<double> tr;
    for (int i = 0; i < 3; ++i) {
      for (double x : env_trace(t->step())) tr.push_back(x);
      for (const Trajectory& x : t->last_batch().traj) EXPECT_EQ(x.version, i);
    }
    traces.push_back(tr);
    params.push_back(params_of(s.model));
  }
  EXPECT_EQ(traces[0], traces[1]);
  EXPECT_TRUE(same_bits(params[0], params[1]));
  RlSetup start;
  EXPECT_FALSE(same_bits(params[0], params_of(start.model)));  // they trained
}

TEST(Async, ThreadLimitCapsTheCallingThreadOnly) {
  set_num_threads(2);
  {
    ThreadLimit one(1);
    EXPECT_EQ(num_threads(), 1);
    int other = 0;
    std::thread([&] { other = num_threads(); }).join();
    EXPECT_EQ(other, 2);  // another thread keeps the pool's count
    {
      ThreadLimit more(4);  // never above the pool's
      EXPECT_EQ(num_threads(), 2);
    }
    EXPECT_EQ(num_threads(), 1);
  }
  EXPECT_EQ(num_threads(), 2);
  set_num_threads(default_num_threads());
}
