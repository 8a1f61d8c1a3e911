// Training-step properties beyond the goldens: bitwise determinism (same run twice; 1 vs 2
// threads; every ISA the same across repeats), recomputation equals storing activations,
// micro-batching with accumulation equals the whole batch, bf16 GEMMs stay within the bf16
// tolerance of f32, and the loss falls when training on a fixed batch.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "common/models.h"
#include "common/tolerance.h"
#include "temper/core/error.h"
#include "temper/core/rng.h"
#include "temper/core/thread_pool.h"
#include "temper/model/lora.h"
#include "temper/model/train_step.h"

using namespace temper;
using namespace temper::test;

namespace {

using test::small_config;

struct TrainRun {
  std::vector<double> losses;
  std::vector<float> params;
};

struct TrainOptions {
  int threads = 2;
  bool recompute = false;
  int64_t micro_batch = 0;
  kernels::Precision precision = kernels::Precision::f32;
  Arch arch = Arch::qwen3;
  int steps = 3;
};

TrainRun train(const TrainOptions& o, int64_t B = 3, int64_t T = 130) {
  set_num_threads(o.threads);
  ModelConfig cfg = small_config(o.arch);
  Transformer model(cfg);
  model.init_random(42, 0.1f);
  model.set_recompute(o.recompute);
  model.set_precision(o.precision);
  TrainConfig tc;
  tc.adamw = {0.9f, 0.95f, 1e-8f, 0.1f};
  tc.lr = {1e-2, 1, 10, 0.1};
  tc.micro_batch = o.micro_batch;
  Trainer trainer(model, tc);
  std::vector<int32_t> tokens(B * T);
  std::vector<float> mask(B * (T - 1), 1.f);
  Rng rng(7, 0);
  for (auto& t : tokens) t = static_cast<int32_t>(rng.next_u32() % cfg.vocab_size);
  for (int64_t i = 0; i < T - 1; i += 5) mask[i] = 0.f;
  TrainRun r;
  for (int s = 0; s < o.steps; ++s) r.losses.push_back(trainer.step(tokens.data(), mask.data(), B, T).loss);
  r.params.assign(model.params(), model.params() + model.flat_size());
  set_num_threads(default_num_threads());
  return r;
}

bool bitwise_equal(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

}  // namespace

TEST(Training, SameRunTwiceIsBitwiseEqual) {
  for (Arch arch : {Arch::llama, Arch::qwen2, Arch::qwen3}) {
    TrainOptions o;
    o.arch = arch;
    TrainRun a = train(o), b = train(o);
    EXPECT_EQ(a.losses, b.losses) << arch_name(arch);
    EXPECT_TRUE(bitwise_equal(a.params, b.params)) << arch_name(arch);
  }
}

TEST(Training, ThreadCountDoesNotChangeABit) {
  for (auto prec : {kernels::Precision::f32, kernels::Precision::bf16})
    for (Arch arch : {Arch::llama, Arch::qwen2, Arch::qwen3}) {
      TrainOptions o1;
      o1.arch = arch;
      o1.precision = prec;
      o1.threads = 1;
      TrainRun a = train(o1);
      for (int threads : {2, 3, 4}) {
        TrainOptions o = o1;
        o.threads = threads;
        TrainRun b = train(o);
        EXPECT_EQ(a.losses, b.losses) << arch_name(arch) << " threads " << threads << " "
                                      << kernels::precision_name(prec);
        EXPECT_TRUE(bitwise_equal(a.params, b.params)) << arch_name(arch) << " threads " << threads;
      }
    }
}

TEST(Training, RecomputeEqualsStoredActivations) {
  TrainOptions a, b;
  b.recompute = true;
  TrainRun x = train(a), y = train(b);
  EXPECT_EQ(x.losses, y.losses);
  EXPECT_TRUE(bitwise_equal(x.params, y.params));
}

namespace {

// A loss on log-probs and entropies both (so every path of the backward carries a gradient).
struct MixedLoss : kernels::ClassifierLoss {
  void coefs(int64_t n, float, float, float* g_lp, float* g_ent) const override {
    *g_lp = -0.01f * static_cast<float>(n % 7 + 1);
    *g_ent = n % 3 == 0 ? 0.003f : 0.f;
  }
};

struct Pass {
  std::vector<float> lp, ent, grads;
};

// One padded forward_backward (B x T) or one packed (a prompt read by two rows, and a row alone), from zeroed grads.
Pass run_pass(Transformer& m, bool packed) {
  const int64_t V = m.config().vocab_size, B = 3, T = 41, N = packed ? 43 : B * T;
  std::vector<int32_t> tok(N), tgt(N);
  Rng rng(5, 0);
  for (int64_t n = 0; n < N; ++n) tok[n] = static_cast<int32_t>(rng.next_u32() % V);
  for (int64_t n = 0; n < N; ++n) tgt[n] = n % 11 == 10 ? -1 : static_cast<int32_t>(rng.next_u32() % V);
  Pass p{std::vector<float>(N), std::vector<float>(N), {}};
  MixedLoss loss;
  m.zero_grad();
  if (packed) {
    std::vector<kernels::AttnSegment> segs(4);
    segs[0].start = 0, segs[0].len = 13;  // the shared prompt
    segs[1].start = 13, segs[1].len = 9, segs[1].prefix_start = 0, segs[1].prefix_len = 13;
    segs[2].start = 22, segs[2].len = 11, segs[2].prefix_start = 0, segs[2].prefix_len = 13;
    segs[3].start = 33, segs[3].len = 10;  // a row alone
    m.forward_backward_packed(tok.data(), tgt.data(), segs, loss, p.lp.data(), p.ent.data());
  } else {
    m.forward_backward(tok.data(), tgt.data(), B, T, loss, p.lp.data(), p.ent.data());
  }
  p.grads.assign(m.grads(), m.grads() + m.flat_size());
  return p;
}

}  // namespace

// Recomputation runs the same forward kernels on the same inputs again: every gradient, log-prob and entropy is
// bitwise the stored path's, for the families' features (Qwen2's biases, Qwen3's q/k norms, Gemma-2's sandwich norms,
// soft-caps and windows, Phi-3's fused projections and longrope), in f32 and bf16, padded and packed.
TEST(Training, RecomputeGradientsEqualTheStoredPathBitForBit) {
  for (Arch arch : {Arch::llama, Arch::qwen2, Arch::qwen3, Arch::gemma2, Arch::phi3})
    for (kernels::Precision prec : {kernels::Precision::f32, kernels::Precision::bf16})
      for (bool packed : {false, true}) {
        SCOPED_TRACE(arch_name(arch) + (prec == kernels::Precision::bf16 ? " bf16" : " f32") +
                     (packed ? " packed" : " padded"));
        const ModelConfig cfg = test::family_config(arch);
        Transformer stored(cfg), recomputed(cfg);
        for (Transformer* m : {&stored, &recomputed}) {
          m->init_random(42, 0.1f);
          m->set_precision(prec);
        }
        recomputed.set_recompute(true);
        const Pass a = run_pass(stored, packed), b = run_pass(recomputed, packed);
        EXPECT_TRUE(bitwise_equal(a.lp, b.lp));
        EXPECT_TRUE(bitwise_equal(a.ent, b.ent));
        EXPECT_TRUE(bitwise_equal(a.grads, b.grads));
        double norm = 0;
        for (float g : b.grads) norm += static_cast<double>(g) * g;
        EXPECT_GT(norm, 0);  // a gradient to compare
        EXPECT_LT(recomputed.activation_bytes(), stored.activation_bytes());
      }
}

TEST(Training, MicroBatchesAccumulateToTheWholeBatch) {
  // Gradients of the whole batch vs the sum over one-row micro-batches (same normalisation).
  ModelConfig cfg = small_config(Arch::qwen2);
  Transformer model(cfg);
  model.init_random(42, 0.1f);
  const int64_t B = 3, T = 70, N = B * T;
  std::vector<int32_t> tokens(N), targets(N, -1);
  Rng rng(9, 0);
  for (auto& t : tokens) t = static_cast<int32_t>(rng.next_u32() % cfg.vocab_size);
  std::vector<float> mask(N, 0.f), lp(N), ent(N);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t + 1 < T; ++t) {
      targets[b * T + t] = tokens[b * T + t + 1];
      mask[b * T + t] = 1.f;
    }
  MaskedCrossEntropy whole(mask.data(), double(B * (T - 1)));
  model.zero_grad();
  model.forward_backward(tokens.data(), targets.data(), B, T, whole, lp.data(), ent.data());
  std::vector<float> g_whole(model.grads(), model.grads() + model.flat_size());
  model.zero_grad();
  for (int64_t b = 0; b < B; ++b) {
    MaskedCrossEntropy part(mask.data() + b * T, double(B * (T - 1)));
    model.forward_backward(tokens.data() + b * T, targets.data() + b * T, 1, T, part, lp.data() + b * T, ent.data() + b * T);
  }
  std::vector<double> want(g_whole.begin(), g_whole.end());
  EXPECT_TRUE(all_close(model.grads(), want.data(), model.flat_size(), tolerance(Kind::reduction, N)));
  // Through the trainer: the loss after an update made from accumulated micro-batches matches.
  TrainOptions a, b;
  b.micro_batch = 1;
  a.steps = b.steps = 2;
  TrainRun x = train(a), y = train(b);
  EXPECT_NEAR(x.losses[0], y.losses[0], 1e-6 * std::fabs(x.losses[0]));
  EXPECT_NEAR(x.losses[1], y.losses[1], 1e-4 * std::fabs(x.losses[1]));
  EXPECT_NE(x.losses[0], x.losses[1]);
}

TEST(Training, SharedPrefixPackingEqualsThePaddedBatch) {
  // Rows = prompt + completion, the loss on completion tokens. Padded: one row each. Packed: each
  // prompt read by several rows is held once (all but its last token, which starts each reader's
  // segment, so every completion token keeps its own predicting row); a row alone is one segment.
  for (Arch arch : {Arch::llama, Arch::qwen2, Arch::qwen3}) {
    SCOPED_TRACE(static_cast<int>(arch));
    ModelConfig cfg = small_config(arch);
    Transformer model(cfg);
    model.init_random(42, 0.1f);
    Rng rng(11, 0);
    auto draw = [&](int64_t n) {
      std::vector<int32_t> v(static_cast<size_t>(n));
      for (auto& t : v) t = static_cast<int32_t>(rng.next_u32() % cfg.vocab_size);
      return v;
    };
    const std::vector<int32_t> pa = draw(70), pb = draw(3), pc = draw(4);
    struct Row {
      const std::vector<int32_t>* prompt;
      std::vector<int32_t> completion;
      bool shared;
    };
    std::vector<Row> rows = {{&pa, draw(5), true},  {&pa, draw(9), true}, {&pb, draw(4), true},
                             {&pc, draw(7), false}, {&pa, draw(1), true}, {&pb, draw(2), true}};
    int64_t T = 0;
    for (const Row& r : rows) T = std::max<int64_t>(T, static_cast<int64_t>(r.prompt->size() + r.completion.size()));
    const int64_t B = static_cast<int64_t>(rows.size()), N = B * T;
    std::vector<int32_t> tok(N, 0), tgt(N, -1);
    std::vector<float> mask(N, 0.f), lp(N), ent(N);
    double count = 0;
    for (int64_t b = 0; b < B; ++b) {
      const Row& r = rows[static_cast<size_t>(b)];
      const int64_t P = static_cast<int64_t>(r.prompt->size());
      std::copy(r.prompt->begin(), r.prompt->end(), tok.begin() + b * T);
      std::copy(r.completion.begin(), r.completion.end(), tok.begin() + b * T + P);
      for (size_t i = 0; i < r.completion.size(); ++i) {
        tgt[b * T + P - 1 + static_cast<int64_t>(i)] = r.completion[i];
        mask[b * T + P - 1 + static_cast<int64_t>(i)] = 1.f;
        ++count;
      }
    }
    MaskedCrossEntropy padded_loss(mask.data(), count);
    model.zero_grad();
    model.forward_backward(tok.data(), tgt.data(), B, T, padded_loss, lp.data(), ent.data());
    std::vector<double> g_padded(model.grads(), model.grads() + model.flat_size());
    // The packed layout: prefixes first as they are met, each row's segment after.
    std::vector<kernels::AttnSegment> segs;
    std::vector<int32_t> ptok, ptgt;
    std::vector<float> pmask;
    std::vector<std::pair<int64_t, int64_t>> same;  // (padded row, packed row) holding one prediction
    std::vector<std::pair<const std::vector<int32_t>*, size_t>> prefix_of;
    auto push = [&](int32_t t, int32_t target, float m) {
      ptok.push_back(t), ptgt.push_back(target), pmask.push_back(m);
    };
    for (int64_t b = 0; b < B; ++b) {
      const Row& r = rows[static_cast<size_t>(b)];
      const int64_t P = static_cast<int64_t>(r.prompt->size());
      kernels::AttnSegment g;
      int64_t from = 0;  // the row's first token in its own segment
      if (r.shared) {
        auto it = std::find_if(prefix_of.begin(), prefix_of.end(), [&](auto& x) { return x.first == r.prompt; });
        if (it == prefix_of.end()) {
          kernels::AttnSegment p;
          p.start = static_cast<int64_t>(ptok.size()), p.len = P - 1;
          for (int64_t t = 0; t + 1 < P; ++t) push((*r.prompt)[static_cast<size_t>(t)], -1, 0.f);
          segs.push_back(p);
          prefix_of.emplace_back(r.prompt, segs.size() - 1);
          it = prefix_of.end() - 1;
        }
        g.prefix_start = segs[it->second].start, g.prefix_len = P - 1;
        from = P - 1;
      }
      g.start = static_cast<int64_t>(ptok.size());
      for (int64_t t = from; t < P + static_cast<int64_t>(r.completion.size()); ++t) {
        if (tgt[b * T + t] >= 0) same.emplace_back(b * T + t, static_cast<int64_t>(ptok.size()));
        push(tok[b * T + t], tgt[b * T + t], mask[b * T + t]);
      }
      g.len = static_cast<int64_t>(ptok.size()) - g.start;
      segs.push_back(g);
    }
    const int64_t Np = static_cast<int64_t>(ptok.size());
    EXPECT_LT(Np, N / 2);  // the 70-token prompt once instead of three times, no padding
    std::vector<float> plp(Np), pent(Np);
    MaskedCrossEntropy packed_loss(pmask.data(), count);
    model.zero_grad();
    model.forward_backward_packed(ptok.data(), ptgt.data(), segs, packed_loss, plp.data(), pent.data());
    EXPECT_TRUE(all_close(model.grads(), g_padded.data(), model.flat_size(), tolerance(Kind::reduction, N)));
    ASSERT_EQ(same.size(), static_cast<size_t>(count));
    for (auto [a, p] : same) {
      EXPECT_NEAR(plp[p], lp[a], 1e-5f * (1 + std::fabs(lp[a])));
      EXPECT_NEAR(pent[p], ent[a], 1e-5f * (1 + std::fabs(ent[a])));
    }
    std::vector<float> flp(Np, 0.f), fent(Np, 0.f);
    model.forward_logprobs_packed(ptok.data(), ptgt.data(), segs, flp.data(), fent.data());
    for (auto [a, p] : same) EXPECT_EQ(flp[p], plp[p]);
  }
}

TEST(Training, Bf16StaysWithinBf16ToleranceOfF32) {
  TrainOptions a, b;
  b.precision = kernels::Precision::bf16;
  TrainRun x = train(a), y = train(b);
  for (size_t i = 0; i < x.losses.size(); ++i)
    EXPECT_NEAR(y.losses[i], x.losses[i], tolerance(Kind::bf16) * x.losses[i]) << "step " << i;
}

TEST(Training, NonFiniteGradientIsSkippedAndLeavesParamsUnchanged) {
  ModelConfig cfg = small_config(Arch::llama);
  Transformer model(cfg);
  model.init_random(1, 0.1f);
  model.param("model.norm.weight").data<float>()[0] = NAN;
  model.params_updated();
  std::vector<float> before(model.params(), model.params() + model.flat_size());
  TrainConfig tc;
  Trainer trainer(model, tc);
  std::vector<int32_t> tokens(2 * 8, 3);
  StepStats st = trainer.step(tokens.data(), nullptr, 2, 8);
  EXPECT_TRUE(st.skipped);
  EXPECT_EQ(0, std::memcmp(before.data(), model.params(), before.size() * sizeof(float)));
  std::vector<float> m(trainer.adam_m(), trainer.adam_m() + model.flat_size());
  EXPECT_TRUE(std::all_of(m.begin(), m.end(), [](float x) { return x == 0.f; }));
  EXPECT_EQ(trainer.steps_done(), 0);
  EXPECT_EQ(trainer.skipped(), 1);
}

// LoRA through the trainer: the optimiser steps the adapters only (their moments sized for them); the frozen base
// stays bit for bit; the adapters move and the loss falls.
TEST(Training, LoraTrainsTheAdaptersOnlyAndTheLossFalls) {
  ModelConfig cfg = small_config(Arch::llama);
  Transformer model(cfg);
  model.init_random(1, 0.1f);
  LoraConfig lc;
  lc.rank = 4;
  lc.targets = {LoraTarget::q, LoraTarget::v, LoraTarget::down};
  LoraAdapters lora(cfg, lc);
  lora.init(7);
  model.attach_lora(&lora);
  model.set_base_frozen(true);
  TrainConfig tc;
  tc.lr.peak = 1e-2;
  Trainer trainer(model, tc);
  trainer.optimizer().train_adapters(&lora);
  EXPECT_EQ(trainer.optimizer().size(), lora.size());
  std::vector<float> base(model.params(), model.params() + model.flat_size());
  std::vector<float> a0(lora.params(), lora.params() + lora.size());
  std::vector<int32_t> tokens(4 * 16);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<int32_t>((i * 7 + 3) % cfg.vocab_size);
  std::vector<double> losses;
  for (int s = 0; s < 8; ++s) losses.push_back(trainer.step(tokens.data(), nullptr, 4, 16).loss);
  EXPECT_EQ(0, std::memcmp(base.data(), model.params(), base.size() * sizeof(float)));
  EXPECT_NE(0, std::memcmp(a0.data(), lora.params(), a0.size() * sizeof(float)));
  EXPECT_LT(losses.back(), 0.95 * losses.front());
  EXPECT_EQ(trainer.steps_done(), 8);
}

TEST(Training, LossFallsOnAFixedBatch) {
  TrainOptions o;
  o.steps = 8;
  TrainRun r = train(o);
  EXPECT_LT(r.losses.back(), 0.8 * r.losses.front());
}

TEST(LrSchedule, WarmupThenCosineToFloor) {
  LrSchedule s{1.0, 4, 14, 0.1};
  EXPECT_DOUBLE_EQ(s.at(0), 0.2);
  EXPECT_DOUBLE_EQ(s.at(3), 0.8);
  EXPECT_DOUBLE_EQ(s.at(4), 1.0);
  EXPECT_NEAR(s.at(9), 0.1 + 0.9 * 0.5, 1e-12);  // halfway through the decay
  EXPECT_NEAR(s.at(14), 0.1, 1e-12);
  EXPECT_NEAR(s.at(100), 0.1, 1e-12);
  LrSchedule constant{0.5, 0, 0, 0};
  EXPECT_DOUBLE_EQ(constant.at(1000), 0.5);
}
