// The update's forward taken from the rollout (rl.reuse_activations): the rollout engine keeps each
// forwarded token's activations (ActivationStore), rl::reusable_slots accepts a packed micro-batch only
// when every row's tag chain matches it, and the backward over the kept activations gives the gradient,
// log-probs and entropies of the ordinary packed forward and backward: for llama / qwen2 / qwen3, with
// forks, with preemption (recomputed prefixes), with speculative verify passes. Edited rows, changed
// weights and a full store are refused.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "common/models.h"
#include "common/tolerance.h"
#include "temper/kernels/classifier.h"
#include "temper/model/activation_store.h"
#include "temper/model/int4_drafter.h"
#include "temper/rl/packed_rows.h"
#include "temper/rl/reused_activations.h"
#include "temper/rollout/engine.h"
#include "temper/rollout/spec_control.h"

using namespace temper;
using namespace temper::rollout;

namespace {

// Per-row loss: sum of log-probs at the targets, weighted by a fixed pattern (so the gradient is not zero).
struct WeightedLogprob : kernels::ClassifierLoss {
  std::vector<float> w;
  explicit WeightedLogprob(std::vector<float> weights) : w(std::move(weights)) {}
  void coefs(int64_t n, float, float, float* g_lp, float* g_ent) const override {
    *g_lp = w[static_cast<size_t>(n)];
    *g_ent = 0.01f * w[static_cast<size_t>(n)];
  }
};

struct ForkAt3 : RolloutHook {
  HookDecision after_token(const RolloutRequest&, const Completion& c) override {
    HookDecision d;
    d.forks = c.parent < 0 && c.member == 0 && c.tokens.size() == 3 ? 1 : 0;
    return d;
  }
};

RolloutRequest request(std::vector<int32_t> prompt, int64_t g, int64_t max_new, uint64_t seed) {
  RolloutRequest r;
  r.prompt = std::move(prompt);
  r.group_size = g;
  r.max_new = max_new;
  r.seed = seed;
  r.sampler.temperature = 1.f;
  r.keep_activations = true;
  return r;
}

// One packed micro-batch of every completion (the trainer's layout: the last token left out).
struct Micro {
  rl::PackedRows packed;
  std::vector<int32_t> tok, tgt;
  std::vector<float> w;
  std::vector<const std::vector<int64_t>*> slots;
  int64_t T = 0;
};

Micro micro(const std::vector<RolloutRequest>& reqs, const std::vector<Completion>& out) {
  Micro m;
  for (const Completion& c : out) m.T = std::max<int64_t>(m.T, reqs[c.request].prompt.size() + c.tokens.size());
  std::vector<const std::vector<int32_t>*> prompts;
  std::vector<int64_t> lens;
  std::vector<int32_t> tok(out.size() * m.T, 0), tgt(out.size() * m.T, -1);
  for (size_t r = 0; r < out.size(); ++r) {
    const std::vector<int32_t>& p = reqs[out[r].request].prompt;
    prompts.push_back(&p);
    lens.push_back(static_cast<int64_t>(p.size() + out[r].tokens.size()) - 1);
    m.slots.push_back(&out[r].act_slots);
    std::copy(p.begin(), p.end(), tok.begin() + r * m.T);
    std::copy(out[r].tokens.begin(), out[r].tokens.end(), tok.begin() + r * m.T + p.size());
    for (size_t i = 0; i < out[r].tokens.size(); ++i) tgt[r * m.T + p.size() - 1 + i] = out[r].tokens[i];
  }
  m.packed = rl::pack_rows(prompts, lens, m.T);
  m.packed.gather(tok.data(), &m.tok);
  m.packed.gather(tgt.data(), &m.tgt);
  for (int64_t n = 0; n < m.packed.size(); ++n)
    m.w.push_back(m.tgt[n] < 0 ? 0.f : 0.1f + 0.05f * static_cast<float>(n % 7));
  return m;
}

// The packed forward + backward, then the same from the store: gradients, log-probs and entropies agree.
void expect_same_update(Transformer& model, const ActivationStore& store, const Micro& m, double tol = 2e-5) {
  std::vector<int64_t> slots;
  ASSERT_TRUE(rl::reusable_slots(store, m.packed, m.tok.data(), m.slots, m.T, &slots));
  const int64_t N = m.packed.size();
  WeightedLogprob loss(m.w);
  std::vector<float> lp(N), ent(N), lp2(N), ent2(N);
  model.zero_grad();
  model.forward_backward_packed(m.tok.data(), m.tgt.data(), m.packed.segs, loss, lp.data(), ent.data());
  std::vector<float> g(model.grads(), model.grads() + model.flat_size());
  ASSERT_TRUE(model.reusable(store));
  model.zero_grad();
  model.forward_backward_packed(m.tok.data(), m.tgt.data(), m.packed.segs, loss, lp2.data(), ent2.data(), store,
                                slots.data());
  double worst = 0, scale = 0;
  for (int64_t i = 0; i < model.flat_size(); ++i) {
    worst = std::max(worst, double(std::fabs(model.grads()[i] - g[i])));
    scale = std::max(scale, double(std::fabs(g[i])));
  }
  EXPECT_GT(scale, 1e-3);
  EXPECT_LT(worst, tol * scale);
  const float ltol = static_cast<float>(tol) / 2;
  for (int64_t n = 0; n < N; ++n) {
    if (m.tgt[n] < 0) continue;
    EXPECT_NEAR(lp2[n], lp[n], ltol * (1 + std::fabs(lp[n]))) << n;
    EXPECT_NEAR(ent2[n], ent[n], ltol * (1 + std::fabs(ent[n]))) << n;
  }
}

}  // namespace

TEST(ReusedActivations, TheBackwardOverKeptActivationsEqualsTheForwardBackward) {
  for (Arch arch : {Arch::llama, Arch::qwen2, Arch::qwen3}) {
    SCOPED_TRACE(static_cast<int>(arch));
    ModelConfig cfg = test::small_config(arch, 128);
    Transformer model(cfg);
    model.init_random(7, 0.3f);
    KvPool pool(cfg, 4, 256);
    RolloutEngine eng(model, pool);
    std::vector<RolloutRequest> reqs = {request({5, 9, 2, 7, 7, 1}, 3, 12, 1), request({3, 4}, 2, 9, 2),
                                        request({8}, 2, 5, 3)};
    for (bool mixed : {false, true}) {
      // mixed: another request in the same steps keeps nothing, so the kept rows' slots are not
      // consecutive and are copied from the pass's scratch (otherwise the pass writes into the store).
      std::vector<RolloutRequest> run = reqs;
      if (mixed) {
        run.insert(run.begin() + 1, request({2, 2, 6}, 2, 12, 4));
        run[1].keep_activations = false;
      }
      ActivationStore store(model.act_field_widths());  // fresh: nothing left from the other case
      store.reset(4096, model.params_version());
      eng.set_activation_store(&store);
      ForkAt3 hook;
      std::vector<Completion> out = eng.run(run, &hook);
      ASSERT_EQ(eng.stats().forks, mixed ? 4 : 3);
      std::vector<Completion> kept;
      for (Completion c : out) {
        if (mixed && c.request == 1) continue;
        if (mixed && c.request > 1) --c.request;
        kept.push_back(std::move(c));
      }
      expect_same_update(model, store, micro(reqs, kept));
    }
  }
}

TEST(ReusedActivations, Bf16ModelWithABf16KvCache) {
  // bf16 GEMMs in the rollout's packed kernels and in training round differently; K/V are rounded to
  // bf16 alike in both (and the bf16 cache holds exactly those values).
  test::RandomModel f;
  f.model.set_precision(kernels::Precision::bf16);
  ActivationStore store(f.model.act_field_widths());
  store.reset(4096, f.model.params_version());
  KvPool pool(f.cfg, 4, 128, DType::bf16);
  RolloutEngine eng(f.model, pool);
  eng.set_activation_store(&store);
  std::vector<RolloutRequest> reqs = {request({5, 9, 2, 7}, 3, 16, 1), request({6, 1}, 2, 12, 2)};
  std::vector<Completion> out = eng.run(reqs);
  expect_same_update(f.model, store, micro(reqs, out), 5e-4);  // measured 1.1e-4
}

TEST(ReusedActivations, PreemptedAndRecomputedSequencesStillMatch) {
  test::RandomModel f;
  ActivationStore store(f.model.act_field_widths());
  store.reset(4096, f.model.params_version());
  KvPool small(f.cfg, 4, 26);  // too few blocks: the newest sequences are preempted and recomputed
  RolloutEngine eng(f.model, small);
  eng.set_activation_store(&store);
  std::vector<RolloutRequest> reqs = {request({1, 2, 3, 4, 5}, 4, 30, 1), request({7, 8, 9}, 3, 30, 2)};
  std::vector<Completion> out = eng.run(reqs);
  ASSERT_GT(eng.stats().preemptions, 0);
  // A recomputed sequence holds its own prompt slots, not its siblings': packed with them (one prefix
  // for the group) it is refused; alone, every row is taken.
  Micro all = micro(reqs, out);
  std::vector<int64_t> slots;
  EXPECT_FALSE(rl::reusable_slots(store, all.packed, all.tok.data(), all.slots, all.T, &slots));
  for (size_t r = 0; r < out.size(); ++r) {
    std::vector<Completion> one = {out[r]};
    one[0].request = 0;
    expect_same_update(f.model, store, micro({reqs[out[r].request]}, one));
  }
}

TEST(ReusedActivations, SpeculativeVerifyPassesKeepThePolicysActivations) {
  test::RandomModel f;
  Int4Drafter drafter;
  drafter.refresh(f.model);
  SpecConfig sc;
  sc.toggle = SpecToggle::always;
  SpecController spec(sc);
  ActivationStore store(f.model.act_field_widths());
  store.reset(8192, f.model.params_version());
  KvPool pool(f.cfg, 8, 128);
  EngineConfig ec(16);
  ec.drafter = &drafter;
  ec.spec = &spec;
  RolloutEngine eng(f.model, pool, ec);
  eng.set_activation_store(&store);
  std::vector<RolloutRequest> reqs = {request({5, 9, 2, 40}, 3, 24, 4), request({6, 9, 2}, 2, 20, 5)};
  std::vector<Completion> out = eng.run(reqs);
  ASSERT_GT(eng.stats().spec_cycles, 0);
  ASSERT_GT(eng.stats().drafted, eng.stats().accepted);  // some drafts were rejected: their slots are stale
  expect_same_update(f.model, store, micro(reqs, out));
}

TEST(ReusedActivations, EditedRowsChangedWeightsAndAFullStoreAreRefused) {
  test::RandomModel f;
  ActivationStore store(f.model.act_field_widths());
  store.reset(4096, f.model.params_version());
  KvPool pool(f.cfg, 4, 128);
  RolloutEngine eng(f.model, pool);
  eng.set_activation_store(&store);
  std::vector<RolloutRequest> reqs = {request({5, 9, 2, 7}, 3, 10, 1)};
  std::vector<Completion> out = eng.run(reqs);
  std::vector<int64_t> slots;
  Micro m = micro(reqs, out);
  ASSERT_TRUE(rl::reusable_slots(store, m.packed, m.tok.data(), m.slots, m.T, &slots));
  // A method's edit: one completion token changed (its later positions were computed after the old one).
  std::vector<Completion> edited = out;
  edited[1].tokens[4] = (edited[1].tokens[4] + 1) % static_cast<int32_t>(f.cfg.vocab_size);
  Micro e = micro(reqs, edited);
  EXPECT_FALSE(rl::reusable_slots(store, e.packed, e.tok.data(), e.slots, e.T, &slots));
  // A row without kept activations (another rank's, or not kept).
  std::vector<Completion> bare = out;
  bare[2].act_slots.clear();
  Micro b = micro(reqs, bare);
  EXPECT_FALSE(rl::reusable_slots(store, b.packed, b.tok.data(), b.slots, b.T, &slots));
  // A store too small for the rollout: the later positions have no slot.
  ActivationStore tiny(f.model.act_field_widths());
  tiny.reset(20, f.model.params_version());
  eng.set_activation_store(&tiny);
  std::vector<Completion> cut = eng.run(reqs);
  EXPECT_EQ(tiny.size(), 20);
  Micro c = micro(reqs, cut);
  EXPECT_FALSE(rl::reusable_slots(tiny, c.packed, c.tok.data(), c.slots, c.T, &slots));
  // New weights: the store holds the old ones' activations.
  EXPECT_TRUE(f.model.reusable(store));
  f.model.params()[0] += 1e-3f;
  f.model.params_updated();
  EXPECT_FALSE(f.model.reusable(store));
  std::vector<float> lp(m.packed.size()), ent(m.packed.size());
  WeightedLogprob loss(m.w);
  EXPECT_THROW(f.model.forward_backward_packed(m.tok.data(), m.tgt.data(), m.packed.segs, loss, lp.data(), ent.data(),
                                               store, slots.data()),
               Error);
}

// A recomputing model cannot train from kept activations (its backward rebuilds each layer's from the layer's
// input): the update falls back to its own forward (policy_update.cpp asks reusable() first), and a direct call is
// refused naming recomputation. Recipes turn rl.reuse_activations off with model.recompute (tests/app RunConfig).
TEST(ReusedActivations, ARecomputingModelFallsBackToItsOwnForward) {
  test::RandomModel f;
  ActivationStore store(f.model.act_field_widths());
  store.reset(4096, f.model.params_version());
  KvPool pool(f.cfg, 4, 128);
  RolloutEngine eng(f.model, pool);
  eng.set_activation_store(&store);
  std::vector<RolloutRequest> reqs = {request({5, 9, 2, 7}, 3, 10, 1)};
  std::vector<Completion> out = eng.run(reqs);
  Micro m = micro(reqs, out);
  std::vector<int64_t> slots;
  ASSERT_TRUE(rl::reusable_slots(store, m.packed, m.tok.data(), m.slots, m.T, &slots));
  ASSERT_TRUE(f.model.reusable(store));
  f.model.set_recompute(true);
  EXPECT_FALSE(f.model.reusable(store));
  std::vector<float> lp(m.packed.size()), ent(m.packed.size());
  WeightedLogprob loss(m.w);
  try {
    f.model.forward_backward_packed(m.tok.data(), m.tgt.data(), m.packed.segs, loss, lp.data(), ent.data(), store,
                                    slots.data());
    ADD_FAILURE() << "a recomputing model trained from kept activations";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("recomputes"), std::string::npos) << e.what();
  }
  // Its own forward and backward: the gradient of the model without recomputation, bit for bit, which equals the
  // update over the kept activations (within expect_same_update's tolerance).
  f.model.zero_grad();
  f.model.forward_backward_packed(m.tok.data(), m.tgt.data(), m.packed.segs, loss, lp.data(), ent.data());
  const std::vector<float> got(f.model.grads(), f.model.grads() + f.model.flat_size());
  f.model.set_recompute(false);
  std::vector<float> lp2(lp.size()), ent2(ent.size());
  f.model.zero_grad();
  f.model.forward_backward_packed(m.tok.data(), m.tgt.data(), m.packed.segs, loss, lp2.data(), ent2.data());
  EXPECT_EQ(lp, lp2);
  EXPECT_EQ(std::memcmp(got.data(), f.model.grads(), got.size() * sizeof(float)), 0);
  expect_same_update(f.model, store, m);
}
