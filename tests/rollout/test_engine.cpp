// The rollout engine: greedy equals step-by-step argmax of a full recompute; recorded policy
// log-probs equal the training forward's (fp32, max |diff| <= 1e-5); a group sharing its prompt
// gives exactly the tokens of independent sequences with the same streams; tokens do not depend
// on the batch composition or the thread count; stop ids, max_new and the text hook finish
// sequences; continuous batching admits queued requests as others finish.
#include <gtest/gtest.h>

#include <cmath>

#include "common/models.h"
#include "temper/core/error.h"
#include "temper/core/profile.h"
#include "temper/core/thread_pool.h"
#include "temper/rollout/engine.h"

using namespace temper;
using namespace temper::rollout;

namespace {

using Fixture = test::RandomModel;

RolloutRequest request(std::vector<int32_t> prompt, int64_t g, int64_t max_new, uint64_t seed, bool greedy = false) {
  RolloutRequest r;
  r.prompt = std::move(prompt);
  r.group_size = g;
  r.max_new = max_new;
  r.seed = seed;
  r.sampler.greedy = greedy;
  r.sampler.temperature = 0.9f;
  r.sampler.top_p = 0.95f;
  return r;
}

// The largest |recorded policy log-prob - the training forward's| over the completions of one prompt.
double max_logprob_gap(Transformer& model, const std::vector<int32_t>& prompt, const std::vector<Completion>& out) {
  double worst = 0;
  for (const Completion& c : out) {
    std::vector<int32_t> seq = prompt;
    seq.insert(seq.end(), c.tokens.begin(), c.tokens.end());
    const int64_t T = static_cast<int64_t>(seq.size());
    std::vector<int32_t> targets(T, -1);
    for (int64_t t = 0; t + 1 < T; ++t) targets[t] = seq[t + 1];
    std::vector<float> lp(T), ent(T);
    model.forward_logprobs(seq.data(), targets.data(), 1, T, lp.data(), ent.data());
    for (size_t i = 0; i < c.tokens.size(); ++i)
      worst = std::max(worst, double(std::fabs(lp[prompt.size() - 1 + i] - c.policy_logprob[i])));
  }
  return worst;
}

}  // namespace

TEST(RolloutEngine, GreedyEqualsArgmaxOfFullRecompute) {
  Fixture f;
  KvPool pool(f.cfg, 8, 64);
  RolloutEngine eng(f.model, pool);
  std::vector<int32_t> prompt = {4, 8, 15, 16, 23, 42};
  auto out = eng.run({request(prompt, 1, 20, 1, true)});
  ASSERT_EQ(out.size(), 1u);
  std::vector<int32_t> seq = prompt;
  const int64_t V = f.cfg.vocab_size;
  for (int32_t t : out[0].tokens) {
    std::vector<float> logits(seq.size() * V);
    f.model.forward_logits(seq.data(), 1, static_cast<int64_t>(seq.size()), logits.data());
    const float* z = logits.data() + (seq.size() - 1) * V;
    int32_t best = static_cast<int32_t>(std::max_element(z, z + V) - z);
    ASSERT_EQ(t, best);
    seq.push_back(t);
  }
  EXPECT_EQ(out[0].finish, FinishReason::length);
}

TEST(RolloutEngine, PolicyLogprobsEqualTheTrainingForward) {
  Fixture f;
  KvPool pool(f.cfg, 8, 128);
  RolloutEngine eng(f.model, pool);
  auto out = eng.run({request({1, 2, 3, 4, 5}, 3, 24, 7), request({9, 8, 7}, 2, 24, 8)});
  double worst = 0;
  for (const Completion& c : out) {
    std::vector<int32_t> prompt = c.request == 0 ? std::vector<int32_t>{1, 2, 3, 4, 5} : std::vector<int32_t>{9, 8, 7};
    std::vector<int32_t> seq = prompt;
    seq.insert(seq.end(), c.tokens.begin(), c.tokens.end());
    const int64_t T = static_cast<int64_t>(seq.size());
    std::vector<int32_t> targets(T, -1);
    for (int64_t t = 0; t + 1 < T; ++t) targets[t] = seq[t + 1];
    std::vector<float> lp(T), ent(T);
    f.model.forward_logprobs(seq.data(), targets.data(), 1, T, lp.data(), ent.data());
    for (size_t i = 0; i < c.tokens.size(); ++i) {
      size_t t = prompt.size() - 1 + i;
      worst = std::max(worst, double(std::fabs(lp[t] - c.policy_logprob[i])));
      EXPECT_NEAR(ent[t], c.entropy[i], 1e-4);
    }
  }
  std::printf("max |rollout log-prob - training log-prob| = %.3g\n", worst);
  EXPECT_LE(worst, 1e-5);
}

TEST(RolloutEngine, GroupSharingEqualsIndependentSequencesAndBatchCompositionDoesNotMatter) {
  Fixture f;
  std::vector<int32_t> prompt = {3, 1, 4, 1, 5, 9, 2, 6, 5, 3};
  KvPool pool(f.cfg, 4, 256);
  RolloutEngine eng(f.model, pool);
  auto group = eng.run({request(prompt, 4, 16, 99)});
  std::vector<RolloutRequest> singles;
  for (uint64_t g = 0; g < 4; ++g) {
    RolloutRequest r = request(prompt, 1, 16, 99);
    r.stream = g;
    singles.push_back(r);
  }
  // Independent members, mixed with an unrelated request, on one thread and two.
  singles.insert(singles.begin() + 2, request({7, 7, 7}, 3, 9, 5));
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    auto ind = eng.run(singles);
    std::vector<const Completion*> members;
    for (const auto& c : ind)
      if (c.request != 2) members.push_back(&c);
    ASSERT_EQ(members.size(), 4u);
    for (int g = 0; g < 4; ++g) EXPECT_EQ(group[g].tokens, members[g]->tokens) << "member " << g << " threads " << threads;
  }
  set_num_threads(default_num_threads());
  EXPECT_EQ(pool.free_blocks(), 256);  // everything released
}

TEST(RolloutEngine, StopIdsHooksAndContinuousBatching) {
  Fixture f;
  KvPool pool(f.cfg, 4, 40);  // small: not every request fits at once
  RolloutEngine eng(f.model, pool, EngineConfig{3, {}});
  std::vector<RolloutRequest> reqs;
  for (uint64_t i = 0; i < 6; ++i) reqs.push_back(request({int32_t(i + 1), 2, 3}, 1, 12, i));
  auto greedy = eng.run({request({1, 2, 3}, 1, 12, 0, true)});
  RolloutRequest stopping = request({1, 2, 3}, 1, 12, 0, true);
  stopping.stop_ids = {greedy[0].tokens[4]};
  reqs.push_back(stopping);
  StopWhenText hook([](const std::vector<int32_t>& t) { return std::to_string(t.size()); },
                    [](const std::string& s) { return s == "10"; });  // stops every sequence at 10 tokens
  auto out = eng.run(reqs, &hook);
  ASSERT_EQ(out.size(), 7u);
  for (size_t i = 0; i < 6; ++i) {
    EXPECT_EQ(out[i].tokens.size(), 10u);
    EXPECT_EQ(out[i].finish, FinishReason::hook);
  }
  EXPECT_EQ(out[6].finish, FinishReason::stop);
  EXPECT_EQ(out[6].tokens.size(), 5u);
  EXPECT_EQ(pool.free_blocks(), 40);
}

namespace {
// A made-up byte mapping for stop strings: token t reads as one letter.
std::string_view letter(int32_t t) {
  static const std::string abc = "abcdefghijklmnopqrstuvwxyz";
  return std::string_view(abc).substr(static_cast<size_t>(t % 26), 1);
}
}  // namespace

TEST(RolloutEngine, StopStringsSpanTokens) {
  Fixture f;
  KvPool pool(f.cfg, 4, 64);
  RolloutEngine eng(f.model, pool, EngineConfig{8, letter});
  auto free_run = eng.run({request({1, 2, 3}, 1, 24, 3)})[0];
  std::string text;
  for (int32_t t : free_run.tokens) text += letter(t);
  // Stop on the 3 letters ending at token 9 (a string that spans tokens), and on one never produced.
  RolloutRequest q = request({1, 2, 3}, 1, 24, 3);
  std::string target = text.substr(7, 3);
  size_t first = text.find(target);
  q.stop_strings = {"#never#", target};
  auto c = eng.run({q})[0];
  EXPECT_EQ(c.finish, FinishReason::stop);
  EXPECT_EQ(c.stop_string, 1);
  EXPECT_EQ(c.tokens.size(), first + 3);
  EXPECT_EQ(c.tokens, std::vector<int32_t>(free_run.tokens.begin(), free_run.tokens.begin() + long(first + 3)));
  RolloutRequest nobytes = q;
  RolloutEngine plain(f.model, pool);
  EXPECT_THROW(plain.run({nobytes}), Error);  // stop strings need token bytes
  EXPECT_EQ(pool.free_blocks(), 64);
}

TEST(RolloutEngine, HooksForkAtTheCurrentPositionAndForksDrawTheirOwnStream) {
  Fixture f;
  KvPool pool(f.cfg, 4, 128);
  RolloutEngine eng(f.model, pool);
  struct ForkAt5 : RolloutHook {
    int64_t steps = 0;
    HookDecision after_token(const RolloutRequest&, const Completion& c) override {
      HookDecision d;
      d.forks = c.parent < 0 && c.member == 1 && c.tokens.size() == 5 ? 2 : 0;
      return d;
    }
    void after_step(int64_t) override { ++steps; }
  } hook;
  std::vector<int32_t> prompt = {6, 5, 4, 3};
  auto out = eng.run({request(prompt, 2, 14, 21)}, &hook);
  ASSERT_EQ(out.size(), 4u);
  EXPECT_EQ(hook.steps, 14);
  EXPECT_EQ(eng.stats().forks, 2);
  const Completion& parent = out[1];
  for (int k : {2, 3}) {
    const Completion& child = out[k];
    EXPECT_EQ(child.member, k);
    EXPECT_EQ(child.parent, 1);
    EXPECT_EQ(child.fork_pos, 5);
    EXPECT_EQ(child.stream, fork_stream(parent.stream, k - 1));
    ASSERT_EQ(child.tokens.size(), 14u);
    EXPECT_EQ(std::vector<int32_t>(child.tokens.begin(), child.tokens.begin() + 5),
              std::vector<int32_t>(parent.tokens.begin(), parent.tokens.begin() + 5));
    // The continuation equals an independent sequence on prompt + the shared prefix with the fork's stream.
    RolloutRequest ind = request(prompt, 1, 9, 21);
    ind.prompt.insert(ind.prompt.end(), parent.tokens.begin(), parent.tokens.begin() + 5);
    ind.stream = child.stream;
    auto alone = eng.run({ind})[0];
    EXPECT_EQ(alone.tokens, std::vector<int32_t>(child.tokens.begin() + 5, child.tokens.end())) << "fork " << k;
    for (size_t i = 0; i < alone.tokens.size(); ++i)
      EXPECT_NEAR(alone.policy_logprob[i], child.policy_logprob[5 + i], 1e-5);
  }
  EXPECT_NE(out[2].tokens, out[3].tokens);
  EXPECT_EQ(pool.free_blocks(), 128);
}

TEST(RolloutEngine, ForcedTokensAreEmittedFirstWithPolicyLogprobsAndDrawNothing) {
  Fixture f;
  KvPool pool(f.cfg, 4, 128);
  RolloutEngine eng(f.model, pool);
  std::vector<int32_t> prompt = {9, 1, 7, 3, 2};
  // A request's forced tokens: every member emits them, then samples; the draws are those of a
  // sequence whose prompt already ends with the forced tokens (forcing consumes no randomness).
  RolloutRequest q = request(prompt, 2, 10, 33);
  q.forced = {11, 12, 13};
  auto out = eng.run({q});
  ASSERT_EQ(out.size(), 2u);
  RolloutRequest plain = request(prompt, 2, 7, 33);
  plain.prompt.insert(plain.prompt.end(), q.forced.begin(), q.forced.end());
  auto ref = eng.run({plain});
  for (int g = 0; g < 2; ++g) {
    const Completion& c = out[static_cast<size_t>(g)];
    ASSERT_EQ(c.tokens.size(), 10u);
    EXPECT_EQ(c.forced, 3);
    EXPECT_EQ(c.forced_pos, 0);
    EXPECT_EQ(std::vector<int32_t>(c.tokens.begin(), c.tokens.begin() + 3), q.forced);
    EXPECT_EQ(std::vector<int32_t>(c.tokens.begin() + 3, c.tokens.end()), ref[static_cast<size_t>(g)].tokens);
    for (int i = 0; i < 3; ++i) EXPECT_EQ(c.sample_logprob[static_cast<size_t>(i)], c.policy_logprob[static_cast<size_t>(i)]);
  }
  // The recorded log-probs of forced tokens are the training forward's.
  std::vector<int32_t> seq = prompt;
  seq.insert(seq.end(), out[0].tokens.begin(), out[0].tokens.end());
  const int64_t T = static_cast<int64_t>(seq.size()), P = static_cast<int64_t>(prompt.size());
  std::vector<int32_t> tgt(static_cast<size_t>(T), -1);
  for (int64_t t = P - 1; t + 1 < T; ++t) tgt[static_cast<size_t>(t)] = seq[static_cast<size_t>(t + 1)];
  std::vector<float> lp(static_cast<size_t>(T)), ent(static_cast<size_t>(T));
  f.model.forward_logprobs(seq.data(), tgt.data(), 1, T, lp.data(), ent.data());
  for (int64_t i = 0; i < 10; ++i) {
    EXPECT_NEAR(out[0].policy_logprob[static_cast<size_t>(i)], lp[static_cast<size_t>(P - 1 + i)], 1e-5);
    EXPECT_NEAR(out[0].entropy[static_cast<size_t>(i)], ent[static_cast<size_t>(P - 1 + i)], 1e-4);
  }

  // A hook's forks: forced tokens after the fork point, then at most fork_max_new tokens in all.
  struct CloseAt4 : RolloutHook {
    HookDecision after_token(const RolloutRequest&, const Completion& c) override {
      HookDecision d;
      if (c.parent < 0 && c.member == 0 && c.tokens.size() == 4) d.forks = 1, d.fork_forced = {20, 21}, d.fork_max_new = 5;
      return d;
    }
  } hook;
  auto forked = eng.run({request(prompt, 1, 12, 5)}, &hook);
  ASSERT_EQ(forked.size(), 2u);
  const Completion& parent = forked[0];
  const Completion& child = forked[1];
  EXPECT_EQ(parent.tokens.size(), 12u);
  EXPECT_EQ(child.parent, 0);
  EXPECT_EQ(child.fork_pos, 4);
  EXPECT_EQ(child.forced, 2);
  EXPECT_EQ(child.forced_pos, 4);
  ASSERT_EQ(child.tokens.size(), 9u);  // 4 shared + 2 forced + 3 sampled
  EXPECT_EQ(child.finish, FinishReason::length);
  EXPECT_EQ(std::vector<int32_t>(child.tokens.begin(), child.tokens.begin() + 4),
            std::vector<int32_t>(parent.tokens.begin(), parent.tokens.begin() + 4));
  EXPECT_EQ(child.tokens[4], 20);
  EXPECT_EQ(child.tokens[5], 21);
  RolloutRequest ind = request(prompt, 1, 5, 5);
  ind.prompt.insert(ind.prompt.end(), parent.tokens.begin(), parent.tokens.begin() + 4);
  ind.forced = {20, 21};
  ind.stream = child.stream;
  auto alone = eng.run({ind})[0];
  EXPECT_EQ(alone.tokens, std::vector<int32_t>(child.tokens.begin() + 4, child.tokens.end()));
  EXPECT_EQ(pool.free_blocks(), 128);
}

TEST(RolloutEngine, PreemptionWhenThePoolRunsOutGivesTheSameTokens) {
  Fixture f;
  std::vector<RolloutRequest> reqs = {request({1, 2, 3, 4, 5}, 4, 30, 1), request({7, 8, 9}, 3, 30, 2)};
  KvPool big(f.cfg, 4, 256);
  RolloutEngine roomy(f.model, big);
  auto want = roomy.run(reqs);
  EXPECT_EQ(roomy.stats().preemptions, 0);
  KvPool small(f.cfg, 4, 26);  // 7 sequences of up to 35 tokens need ~60 blocks
  RolloutEngine tight(f.model, small);
  auto got = tight.run(reqs);
  EXPECT_GT(tight.stats().preemptions, 0);
  EXPECT_GT(tight.stats().recomputed_tokens, 0);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].tokens, want[i].tokens) << "sequence " << i;
    for (size_t t = 0; t < std::min(got[i].tokens.size(), want[i].tokens.size()); ++t)
      EXPECT_NEAR(got[i].policy_logprob[t], want[i].policy_logprob[t], 1e-5);
  }
  EXPECT_EQ(small.free_blocks(), 26);
  EXPECT_EQ(tight.stats().prefill_tokens, 8);  // one prefill per prompt
}

// In bf16 the forward rounds K and V to bf16 (training and rollouts); the KV cache holds them as bf16
// rows or as f32 rows: the same tokens and log-probs bit for bit, equal to the training forward's.
TEST(RolloutEngine, Bf16RolloutLogprobsEqualTheBf16TrainingForward) {
  Fixture f;
  f.model.set_precision(kernels::Precision::bf16);
  KvPool pool32(f.cfg, 8, 128), pool(f.cfg, 8, 128, DType::bf16);
  std::vector<int32_t> prompt = {11, 12, 13, 14};
  auto out32 = RolloutEngine(f.model, pool32).run({request(prompt, 3, 20, 4)});
  auto out = RolloutEngine(f.model, pool).run({request(prompt, 3, 20, 4)});
  ASSERT_EQ(out.size(), out32.size());
  for (size_t i = 0; i < out.size(); ++i) {
    EXPECT_EQ(out[i].tokens, out32[i].tokens);
    EXPECT_EQ(out[i].policy_logprob, out32[i].policy_logprob);
    EXPECT_EQ(out[i].entropy, out32[i].entropy);
  }
  double worst = 0, vs_f32 = 0;
  for (const Completion& c : out) {
    std::vector<int32_t> seq = prompt;
    seq.insert(seq.end(), c.tokens.begin(), c.tokens.end());
    const int64_t T = static_cast<int64_t>(seq.size());
    std::vector<int32_t> targets(T, -1);
    for (int64_t t = 0; t + 1 < T; ++t) targets[t] = seq[t + 1];
    std::vector<float> lp(T), ent(T);
    f.model.forward_logprobs(seq.data(), targets.data(), 1, T, lp.data(), ent.data());
    for (size_t i = 0; i < c.tokens.size(); ++i)
      worst = std::max(worst, double(std::fabs(lp[prompt.size() - 1 + i] - c.policy_logprob[i])));
    f.model.set_precision(kernels::Precision::f32);  // bf16 really is in use: f32 differs
    f.model.forward_logprobs(seq.data(), targets.data(), 1, T, lp.data(), ent.data());
    f.model.set_precision(kernels::Precision::bf16);
    for (size_t i = 0; i < c.tokens.size(); ++i)
      vs_f32 = std::max(vs_f32, double(std::fabs(lp[prompt.size() - 1 + i] - c.policy_logprob[i])));
  }
  EXPECT_GT(vs_f32, 1e-3);
  std::printf("bf16: max |rollout log-prob - training log-prob| = %.3g\n", worst);
  EXPECT_LE(worst, 1e-5);
  f.model.set_precision(kernels::Precision::f32);  // f32 K/V do not fit a bf16 cache
  EXPECT_THROW(RolloutEngine(f.model, pool).run({request(prompt, 1, 4, 4)}), Error);
}

TEST(RolloutEngine, PrefillTokensPerStepAreCappedWithoutChangingTokens) {
  Fixture f;
  KvPool pool(f.cfg, 4, 256);
  std::vector<RolloutRequest> reqs;
  for (uint64_t i = 0; i < 5; ++i) reqs.push_back(request({int32_t(i + 1), 2, 3, 4, 5, 6}, 2, 8, i));
  RolloutEngine wide(f.model, pool);
  auto want = wide.run(reqs);
  EngineConfig c(64);
  c.max_step_tokens = 7;  // one 6-token prompt per step
  RolloutEngine narrow(f.model, pool, c);
  auto got = narrow.run(reqs);
  EXPECT_GT(narrow.stats().steps, wide.stats().steps);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i].tokens, want[i].tokens) << i;
  EXPECT_EQ(pool.free_blocks(), 256);
}

// bench rollout's decode profile: with profile_decode_only, steps with prompt rows run with the profiler muted and the
// steps that only decode are counted (with their tokens and seconds). Prompts admitted one per step (max_step_tokens)
// make the first steps mix prompt and decode rows: those are neither profiled nor counted.
TEST(RolloutEngine, TheDecodeOnlyProfileSkipsStepsThatPrefill) {
  Fixture f;
  KvPool pool(f.cfg, 4, 256);
  std::vector<RolloutRequest> reqs;
  for (uint64_t i = 0; i < 3; ++i) reqs.push_back(request({int32_t(i + 1), 2, 3, 4, 5, 6}, 1, 5, i));
  EngineConfig c(64);
  c.max_step_tokens = 8;  // one 6-token prompt per step beside the decode rows: steps 1-3 prefill, 2-3 decode too
  c.profile_decode_only = true;
  RolloutEngine eng(f.model, pool, c);
  auto profiled = [&](int64_t max_new) {
    for (auto& r : reqs) r.max_new = max_new;
    profile_reset();
    profile_enable(true);
    eng.run(reqs);
    profile_enable(false);
    double forward = 0;
    for (auto& [k, v] : profile_report())
      if (k == "forward") forward = v;
    return forward;
  };
  EXPECT_EQ(profiled(1), 0.0);  // every step prefills: nothing profiled
  EXPECT_EQ(eng.stats().decode_only_steps, 0);
  EXPECT_GT(profiled(5), 0.0);
  // 3 prefill steps; the last-admitted sequence needs 4 more tokens after its first: 4 decode-only steps.
  EXPECT_EQ(eng.stats().steps, 7);
  EXPECT_EQ(eng.stats().decode_only_steps, 4);
  EXPECT_EQ(eng.stats().decode_only_tokens, 3 + 3 + 2 + 1);  // sequences finish after their 5th token
  EXPECT_GT(eng.stats().decode_only_s, 0.0);
  EXPECT_FALSE(profile_enabled());
}

// A model whose every layer attends a sliding window (Mistral): the engine frees the blocks behind the window as
// sequences grow, so a pool that cannot hold whole sequences still runs them without preemption; the recorded
// log-probs equal the training forward's (windowed), forks made after blocks were dropped continue correctly, and
// every block comes back.
TEST(RolloutEngine, SlidingWindowFreesBlocksBehindTheWindow) {
  ModelConfig cfg = test::small_config(Arch::mistral, 128);
  cfg.sliding_window = 6;
  Transformer model(cfg);
  model.init_random(23, 0.3f);
  const std::vector<int32_t> prompt = {3, 1, 4, 1, 5, 9};
  const int64_t max_new = 40;
  KvPool pool(cfg, 4, 12);  // one sequence of 46 tokens needs 12 blocks whole; 3 hold its window
  RolloutEngine eng(model, pool);
  struct ForkAt20 : RolloutHook {
    HookDecision after_token(const RolloutRequest&, const Completion& c) override {
      HookDecision d;
      d.forks = c.parent < 0 && c.tokens.size() == 20 ? 1 : 0;
      return d;
    }
  } hook;
  auto out = eng.run({request(prompt, 2, max_new, 5)}, &hook);
  ASSERT_EQ(out.size(), 4u);
  EXPECT_EQ(eng.stats().preemptions, 0);
  EXPECT_GT(eng.stats().kv_blocks_dropped, 20);
  for (const Completion& c : out) EXPECT_EQ(static_cast<int64_t>(c.tokens.size()), max_new);
  EXPECT_LE(max_logprob_gap(model, prompt, out), 1e-5);
  EXPECT_EQ(out[2].fork_pos, 20);
  EXPECT_EQ(out[3].fork_pos, 20);
  EXPECT_EQ(pool.free_blocks(), 12);
}

// Every newer family in f32 and bf16 (a bf16 KV cache): the engine's recorded log-probs equal the training
// forward's in the same precision (windows, soft-caps, Gemma's norms, longrope past position 32).
TEST(RolloutEngine, EveryFamilyRolloutLogprobsEqualTheTrainingForwardInF32AndBf16) {
  for (Arch arch : {Arch::mistral, Arch::gemma2, Arch::gemma3, Arch::phi3}) {
    const ModelConfig cfg = test::family_config(arch, 128);
    Transformer model(cfg);
    model.init_random(29, 0.3f);
    model.plan(128, 64);  // the run's longest sequence (45 here, > Phi-3's original 32): longrope's long factors
    for (auto precision : {kernels::Precision::f32, kernels::Precision::bf16}) {
      model.set_precision(precision);
      KvPool pool(cfg, 4, 128, kv_dtype(precision));
      const std::vector<int32_t> prompt = {11, 12, 13, 14, 15};
      const double worst = max_logprob_gap(model, prompt, RolloutEngine(model, pool).run({request(prompt, 2, 40, 4)}));
      // bf16: the products round their inputs to bf16, which turns the paged and training attention kernels'
      // different summation orders (~1e-7) into an occasional one-ulp flip (2^-8): measured up to 7e-3 on the
      // Gemma-2 shape (its activations are large: embeddings x 8) with the AVX-512 products, 2.2e-2 on the
      // Mistral shape (7 of 40 tokens apart, one by 2.2e-2) with the AMX products, whose different sums move
      // which activations sit at a rounding edge. One bf16 ulp of a log-prob near log V = 4.9 is 0.03.
      const bool bf16 = precision == kernels::Precision::bf16;
      EXPECT_LE(worst, bf16 ? 3e-2 : 2e-5) << arch_name(arch) << (bf16 ? " bf16" : " f32");
    }
  }
}
