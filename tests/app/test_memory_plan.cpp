// The memory plan (app/memory_plan.h, issue 37 item 4): Transformer::activation_bytes_for equals what plan()
// reserves for every family's fields; the 7B plan's figures by hand (Qwen2.5-7B: 7,615,616,512 parameters, PEFT's
// 40,370,176 for LoRA r=16 on all seven projections); the largest micro-batch is the fitting edge; suggestions.
// The plan against measured peak RSS is tests/e2e/memory_plan_rss.sh.
#include <gtest/gtest.h>

#include <cmath>

#include "common/error_of.h"
#include "temper/app/memory_plan.h"
#include "temper/app/run_memory.h"
#include "temper/io/hf_config.h"
#include "temper/model/frozen_base.h"
#include "temper/model/int4_drafter.h"
#include "temper/model/param_layout.h"
#include "temper/model/transformer.h"

using namespace temper;
using namespace temper::app;

namespace {

ModelConfig qwen25_7b() {
  ModelConfig c;
  c.arch = Arch::qwen2;
  c.vocab_size = 152064, c.hidden_size = 3584, c.num_layers = 28, c.num_heads = 28, c.num_kv_heads = 4;
  c.head_dim = 128, c.intermediate_size = 18944, c.max_position_embeddings = 32768, c.tie_word_embeddings = false;
  apply_arch_features(c);
  c.validate();
  return c;
}

double item(const MemoryPlan& p, const std::string& name) {
  for (const MemoryItem& i : p.items)
    if (i.name == name) return i.bytes;
  return -1;
}

}  // namespace

TEST(MemoryPlan, ActivationBytesForEqualsThePlannedArena) {
  for (const char* family : {"llama", "qwen2", "qwen3", "gemma2", "gemma3", "phi3"}) {
    ModelConfig c = io::read_hf_config(std::string(TEMPER_TEST_DATA_DIR) + "/golden/" + family + "/config.json");
    for (bool rc : {false, true})
      for (int64_t tokens : {7, 64, 300}) {
        Transformer m(c);
        m.set_recompute(rc);
        const int64_t seq = std::min<int64_t>(tokens, c.max_position_embeddings);
        m.plan(tokens, seq);
        EXPECT_EQ(Transformer::activation_bytes_for(c, tokens, seq, rc), m.activation_bytes())
            << family << " recompute " << rc << " tokens " << tokens;
      }
  }
}

TEST(MemoryPlan, Qwen7bFiguresByHand) {
  const ModelConfig c = qwen25_7b();
  MemorySettings s;
  s.micro_batch = 8, s.seq = 1024;
  const MemoryPlan p = plan_memory(c, s);
  EXPECT_EQ(p.params, 7615616512);
  const double flat = static_cast<double>(ParamLayout(c).total());
  EXPECT_EQ(item(p, "weights (f32 master)"), 4 * flat);
  EXPECT_EQ(item(p, "gradients"), 4 * flat);
  EXPECT_EQ(item(p, "AdamW moments"), 8 * flat);
  EXPECT_EQ(item(p, "KL reference"), -1);
  EXPECT_FALSE(p.on_device);
  // ZeRO-1 over 4 ranks: a quarter of the moments each.
  s.ranks = 4, s.shard_optimizer = true;
  EXPECT_EQ(item(plan_memory(c, s), "AdamW moments"), 2 * flat);
  EXPECT_EQ(item(plan_memory(c, s), "gradients"), 4 * flat);
  EXPECT_EQ(item(plan_memory(c, s), "MPI runtime"), 11.5 * 1024 * 1024);
  // ZeRO-2: a quarter of the gradients too, and the backward's live ranges: Qwen2.5-7B is untied, so the largest of
  // the embedding (152064 x 3584), a layer and the final norm with the LM head (the same size + 3584).
  s.shard_gradients = true;
  const ParamLayout lay(c);
  const auto ranges = lay.ranges();
  ASSERT_EQ(ranges.size(), size_t(c.num_layers + 2));
  EXPECT_EQ(ranges.front().second, 152064 * 3584);
  EXPECT_EQ(ranges.back().second, 152064 * 3584 + 3584);
  EXPECT_LT(ranges[1].second, ranges.back().second);
  int64_t next = 0;  // the ranges tile the buffer
  for (const auto& [off, len] : ranges) EXPECT_EQ(off, std::exchange(next, off + len));
  EXPECT_EQ(next, lay.total());
  EXPECT_EQ(item(plan_memory(c, s), "gradients"), flat + 4.0 * (152064 * 3584 + 3584));
  EXPECT_EQ(item(plan_memory(c, s), "AdamW moments"), 2 * flat);
  s.shard_gradients = false;

  // LoRA r=16: PEFT's count; the adapters' state only; the base frozen in bf16 (int4 for QLoRA's block products).
  MemorySettings l;
  l.micro_batch = 8, l.seq = 1024, l.lora_rank = 16, l.reference = true;
  const MemoryPlan lp = plan_memory(c, l);
  EXPECT_EQ(lp.trainable, 40370176);
  EXPECT_EQ(item(lp, "gradients"), 4.0 * 40370176);
  EXPECT_EQ(item(lp, "AdamW moments"), 8.0 * 40370176);
  EXPECT_EQ(item(lp, "base weights (LoRA)"), 2 * flat);
  EXPECT_EQ(item(lp, "KL reference"), -1);  // the base itself
  l.qlora = true;
  const MemoryPlan qp = plan_memory(c, l);
  EXPECT_LT(item(qp, "base weights (QLoRA)"), 0.4 * item(lp, "base weights (LoRA)"));
  EXPECT_GT(item(qp, "base weights (QLoRA)"), 0.25 * item(lp, "base weights (LoRA)"));

  // A full-model reference on the CPU: its f32 weights and one forward's activations.
  s = MemorySettings{};
  s.micro_batch = 8, s.seq = 1024, s.reference = true;
  EXPECT_GT(item(plan_memory(c, s), "KL reference"), 4 * flat);
}

TEST(MemoryPlan, CudaFullFineTuningOfSevenBDoesNotFitEightyGiBAndLoraDoes) {
  const ModelConfig c = qwen25_7b();
  const double budget = 80.0 * (1 << 30);
  MemorySettings s;
  s.device = "cuda", s.precision = kernels::Precision::bf16, s.micro_batch = 8, s.seq = 1024;
  const MemoryPlan p = plan_memory(c, s);
  EXPECT_TRUE(p.on_device);
  EXPECT_GT(p.device_bytes(), 18.0 * static_cast<double>(p.params));  // f32 + bf16 weights, grads, m, v
  EXPECT_EQ(largest_micro_batch(c, s, budget), 0);
  const std::vector<std::string> fix = memory_fit_suggestions(c, s, budget);
  ASSERT_FALSE(fix.empty());
  bool lora = false;
  for (const std::string& f : fix) lora = lora || f.find("LoRA rank 16") != std::string::npos;
  EXPECT_TRUE(lora) << fix.front();
  s.lora_rank = 16;
  const int64_t b = largest_micro_batch(c, s, budget);
  ASSERT_GT(b, 0);
  s.micro_batch = b;
  EXPECT_LE(plan_memory(c, s).device_bytes(), budget);
  EXPECT_TRUE(memory_fit_suggestions(c, s, budget).empty());
  s.micro_batch = b + 1;
  EXPECT_GT(plan_memory(c, s).device_bytes(), budget);
}

TEST(MemoryPlan, RolloutsAddTheKvCacheAsBudgetedOrComputed) {
  const ModelConfig c = qwen25_7b();
  MemorySettings s;
  s.seq = 1024, s.max_new = 512, s.prompts = 2, s.group = 4, s.max_seqs = 64;
  // 8 sequences of 1024 tokens: 64 blocks of 16 each, K and V, 28 layers of 4 x 128 f32.
  EXPECT_EQ(item(plan_memory(c, s), "KV cache"), 8.0 * 64 * 2 * 28 * 16 * 512 * 4);
  s.kv_memory_mb = 256;  // whole blocks of rl.kv_memory_mb
  const double block = 2.0 * 28 * 16 * 512 * 4;
  EXPECT_EQ(item(plan_memory(c, s), "KV cache"), std::floor(256.0 * (1 << 20) / block) * block);
}

// temper train's evaluation: the blocks its sequences write (eval_seqs of eval_seq tokens) when the scan knows the
// longest held-out prompt, else the whole eval.kv_memory_mb pool.
TEST(MemoryPlan, TheEvaluationCountsTheBlocksItWrites) {
  const ModelConfig c = qwen25_7b();
  auto eval_of = [](RunConfig& r) {
    r.eval.problems = 100, r.eval.samples = 1, r.eval.max_seqs = 4, r.eval.max_new = 128;
  };
  RunConfig cfg;
  eval_of(cfg);
  RunMemoryFacts f;
  f.eval_prompt = 300;
  MemorySettings s;
  s.seq = 1024, s.evaluation = true, s.eval_kv_memory_mb = 256;
  const double block = 2.0 * 28 * 16 * 512 * 4, pool = std::floor(256.0 * (1 << 20) / block) * block;
  EXPECT_EQ(item(plan_memory(c, s), "KV cache (evaluation)"), pool);
  evaluation_sequences(cfg, c, f, s);
  EXPECT_EQ(s.eval_seqs, 4);                                                      // min(max_seqs, problems x samples)
  EXPECT_EQ(s.eval_seq, 300 + 128);                                               // the longest prompt + max_new
  EXPECT_EQ(item(plan_memory(c, s), "KV cache (evaluation)"), 4.0 * 27 * block);  // 27 blocks of 16 hold 428
  cfg.eval.problems = 1, cfg.eval.samples = 3;
  MemorySettings few;
  evaluation_sequences(cfg, c, f, few);
  EXPECT_EQ(few.eval_seqs, 3);
  // The prompts are longer than the scan saw: the whole pool.
  for (int why = 0; why < 3; ++why) {
    RunConfig r;
    eval_of(r);
    RunMemoryFacts g = f;
    if (why == 0) r.eval.revisions = 2;            // each round appends the attempt
    if (why == 1) r.eval.preference = {0.5, 0.5};  // [fair]'s prefix on every prompt
    if (why == 2) g.eval_prompt = 0;               // a held-out stream: not measured
    MemorySettings w;
    w.seq = 1024, w.evaluation = true, w.eval_kv_memory_mb = 256;
    evaluation_sequences(r, c, g, w);
    EXPECT_EQ(w.eval_seqs, 0) << why;
    EXPECT_EQ(item(plan_memory(c, w), "KV cache (evaluation)"), pool) << why;
  }
}

// [rl.speculative]'s drafter: the plan's item against Int4Drafter::bytes() of real copies (each head kind, a
// vocabulary subset, lag 1 keeping two copies), on the tiny preset and a wider shape whose rows take 128-groups.
TEST(MemoryPlan, TheDrafterIsPlannedAsItsCopiesMeasure) {
  ModelConfig wide = model_config_preset("tiny");
  wide.hidden_size = 256, wide.intermediate_size = 704, wide.num_heads = 4, wide.num_kv_heads = 2, wide.head_dim = 64;
  wide.validate();
  for (const ModelConfig& c : {model_config_preset("tiny"), wide}) {
    Transformer m(c);
    m.init_random(5, 0.1f);
    for (DraftHead head : {DraftHead::bf16, DraftHead::int4, DraftHead::f32})
      for (int64_t lag : {0, 1}) {
        const int64_t vocab = head == DraftHead::f32 ? 0 : c.vocab_size / 2;
        Int4Drafter d(128, lag, head);
        if (vocab) d.set_vocab(vocab);
        for (int64_t i = 0; i <= lag; ++i) d.refresh(m);
        const double measured = static_cast<double>(d.bytes()) * static_cast<double>(lag + 1);
        MemorySettings s;
        s.seq = 64, s.max_new = 32, s.prompts = 2, s.group = 2, s.max_seqs = 4;
        s.draft = true, s.draft_lag = lag, s.draft_head = head, s.draft_vocab = vocab;
        const double planned = item(plan_memory(c, s), "drafter (int4)");
        EXPECT_GE(planned, measured) << c.hidden_size << " " << static_cast<int>(head) << " lag " << lag;
        EXPECT_LE(planned, 1.02 * measured) << c.hidden_size << " " << static_cast<int>(head) << " lag " << lag;
      }
  }
  MemorySettings off;
  off.seq = 64, off.max_new = 32;
  EXPECT_EQ(item(plan_memory(model_config_preset("tiny"), off), "drafter (int4)"), -1);
}

TEST(MemoryPlan, AsyncAddsTheExplorersWeightsAndItsOwnKvCache) {
  const ModelConfig c = qwen25_7b();
  MemorySettings s;
  s.seq = 1024, s.max_new = 512, s.prompts = 2, s.group = 4, s.max_seqs = 64, s.packed = false;
  const MemoryPlan sync = plan_memory(c, s);
  EXPECT_EQ(item(sync, "explorer snapshot"), -1);
  s.async = true;
  const MemoryPlan async = plan_memory(c, s);
  const double flat = static_cast<double>(ParamLayout(c).total());
  EXPECT_EQ(item(async, "explorer snapshot"), 4 * flat);  // f32, no packed copy
  EXPECT_EQ(item(async, "KV cache (explorer)"), item(async, "KV cache"));
  EXPECT_EQ(item(async, "rollout logits (explorer)"), 4.0 * 64 * 152064);
  s.precision = kernels::Precision::bf16;  // + the bf16 row-major copy
  EXPECT_EQ(item(plan_memory(c, s), "explorer snapshot"), 6 * flat);
  // LoRA: the frozen base is shared with the policy; the snapshot holds the adapters (PEFT's 40,370,176 for r = 16)
  // and what it derives from the base: the bf16 copy of an f32 base, a held base's rest in bf16, its own panel.
  const double adapters = 4.0 * 40370176, rest = flat - static_cast<double>(FrozenBase::params_for(c));
  const double panel = 4.0 * 146 * 3584;  // the widest panel: 146 rows (2^19 floats / 3584 inputs) of 3584
  s.lora_rank = 16, s.lora_full_base = true, s.precision = kernels::Precision::f32;
  EXPECT_EQ(item(plan_memory(c, s), "explorer snapshot"), adapters);
  s.precision = kernels::Precision::bf16;
  EXPECT_EQ(item(plan_memory(c, s), "explorer snapshot"), adapters + 2 * flat);
  s.lora_full_base = false, s.lora_held = true, s.qlora = true;
  EXPECT_EQ(item(plan_memory(c, s), "explorer snapshot"), adapters + 2 * rest + panel);
  s.precision = kernels::Precision::f32;
  EXPECT_EQ(item(plan_memory(c, s), "explorer snapshot"), adapters + panel);
  EXPECT_LT(item(plan_memory(c, s), "explorer snapshot"), 0.01 * 4 * flat);  // against 4 B a weight without LoRA
}

TEST(MemoryPlan, OutOfRangeSettingsAreNamed) {
  const ModelConfig c = qwen25_7b();
  MemorySettings s;
  s.seq = 40000;
  EXPECT_NE(test::error_of([&] { plan_memory(c, s); }).find("max_position_embeddings"), std::string::npos);
  s = MemorySettings{};
  s.qlora = true;
  EXPECT_NE(test::error_of([&] { plan_memory(c, s); }).find("QLoRA needs a LoRA rank"), std::string::npos);
  s = MemorySettings{};
  s.device = "tpu";
  EXPECT_NE(test::error_of([&] { plan_memory(c, s); }).find("'tpu'"), std::string::npos);
}
