// The device plumbing without a GPU: a DeviceModel that mirrors the model on the CPU (its own
// Transformer, its own KV pool, its own AdamW moments) stands in for the CUDA one. Doing the same
// arithmetic, it must give the CPU's results bit for bit through every path a device takes: the
// rollout engine's paged forward (with the host pool's copy-on-write copies replayed on the mirrored
// blocks; without the replay the tokens differ, so the test can fail), training steps through the
// Optimizer's device branch, lazy weight pulls, pushes after host writes, and moments for checkpoints.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <vector>

#include "common/models.h"
#include "common/test_data.h"
#include "temper/io/hf_config.h"
#include "temper/io/hf_weights.h"
#include "temper/io/safetensors.h"
#include "temper/kernels/adamw.h"
#include "temper/model/device_model.h"
#include "temper/model/int4_drafter.h"
#include "temper/model/kv_pool.h"
#include "temper/model/mirror_device.h"
#include "temper/model/optimizer.h"
#include "temper/model/train_step.h"
#include "temper/model/transformer.h"
#include "temper/rollout/engine.h"
#include "temper/rollout/spec_control.h"

namespace temper {
namespace {

// `copy` gets `model`'s weights and a mirror device of its own (returned).
std::shared_ptr<MirrorDevice> copy_onto_mirror(Transformer& model, Transformer& copy, bool replay_copies = true) {
  std::memcpy(copy.params(), model.params(), sizeof(float) * static_cast<size_t>(model.flat_size()));
  copy.params_updated();
  auto dev = std::make_shared<MirrorDevice>(model.config(), replay_copies);
  copy.attach_device(dev);
  return dev;
}

rollout::RolloutRequest request(std::vector<int32_t> prompt, int64_t g, int64_t max_new, uint64_t seed) {
  rollout::RolloutRequest r;
  r.prompt = std::move(prompt);
  r.group_size = g;
  r.max_new = max_new;
  r.seed = seed;
  r.sampler.temperature = 0.9f;
  r.sampler.top_p = 0.95f;
  return r;
}

std::vector<rollout::Completion> rollouts(Transformer& m) {
  KvPool pool(m.config(), 4, 128);
  rollout::RolloutEngine eng(m, pool);
  struct ForkAt3 : rollout::RolloutHook {  // forks mid-block: more copy-on-write
    rollout::HookDecision after_token(const rollout::RolloutRequest&, const rollout::Completion& c) override {
      rollout::HookDecision d;
      d.forks = c.parent < 0 && c.member == 0 && c.tokens.size() == 3 ? 2 : 0;
      return d;
    }
  } hook;
  // Prompts of 6 and 7 tokens in blocks of 4: the group shares a partial last block (copy on write).
  return eng.run({request({6, 5, 4, 3, 2, 9}, 3, 12, 5), request({1, 2, 3, 4, 5, 6, 7}, 2, 10, 8)}, &hook);
}

TEST(DeviceModel, RolloutsThroughAMirroredDeviceEqualTheCpuEngineBitForBit) {
  test::RandomModel f;
  auto cpu = rollouts(f.model);
  Transformer on_device(f.cfg);
  auto dev = copy_onto_mirror(f.model, on_device);
  auto got = rollouts(on_device);
  ASSERT_EQ(got.size(), cpu.size());
  for (size_t i = 0; i < cpu.size(); ++i) {
    EXPECT_EQ(got[i].tokens, cpu[i].tokens) << "completion " << i;
    EXPECT_EQ(got[i].policy_logprob, cpu[i].policy_logprob) << "completion " << i;
  }
  EXPECT_GT(dev->copies, 0);  // the scenario did copy on write
  // Without replaying the pool's copies the device reads blocks it never wrote: other tokens.
  Transformer forgetful(f.cfg);
  copy_onto_mirror(f.model, forgetful, /*replay_copies=*/false);
  auto wrong = rollouts(forgetful);
  bool differs = false;
  for (size_t i = 0; i < cpu.size(); ++i) differs |= wrong[i].policy_logprob != cpu[i].policy_logprob;
  EXPECT_TRUE(differs);
}

// Every architecture through the mirrored device (sliding windows with blocks dropped behind them, soft-caps,
// Gemma's norms, longrope): rollouts and a training step give the CPU's results bit for bit.
class DeviceGolden : public ::testing::TestWithParam<std::string> {};

TEST_P(DeviceGolden, RolloutsAndATrainingStepThroughAMirrorEqualTheCpuBitForBit) {
  const std::string dir = test::test_data("golden/" + GetParam());
  const ModelConfig cfg = io::read_hf_config(dir + "/config.json");
  Transformer cpu(cfg);
  io::load_hf_weights(cpu, io::SafetensorsFile::open(dir + "/golden.safetensors"), io::ExtraTensors::ignore);
  Transformer on_device(cfg);
  copy_onto_mirror(cpu, on_device);
  auto want = rollouts(cpu), got = rollouts(on_device);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(got[i].tokens, want[i].tokens) << "completion " << i;
    EXPECT_EQ(got[i].policy_logprob, want[i].policy_logprob) << "completion " << i;
  }
  std::vector<int32_t> ids(2 * 20), targets(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    ids[i] = static_cast<int32_t>((i * 37 + 11) % static_cast<size_t>(cfg.vocab_size));
    targets[i] = static_cast<int32_t>((i * 53 + 5) % static_cast<size_t>(cfg.vocab_size));
  }
  std::vector<float> lp_a(ids.size()), ent_a(ids.size()), lp_b(ids.size()), ent_b(ids.size());
  std::vector<float> mask(ids.size(), 1.f);
  MaskedCrossEntropy loss(mask.data(), static_cast<double>(ids.size()));
  cpu.zero_grad();
  on_device.zero_grad();
  cpu.forward_backward(ids.data(), targets.data(), 2, 20, loss, lp_a.data(), ent_a.data());
  on_device.forward_backward(ids.data(), targets.data(), 2, 20, loss, lp_b.data(), ent_b.data());
  EXPECT_EQ(lp_a, lp_b);
  EXPECT_EQ(ent_a, ent_b);
  EXPECT_EQ(0, std::memcmp(cpu.grads(), on_device.grads(), sizeof(float) * static_cast<size_t>(cpu.flat_size())));
}

INSTANTIATE_TEST_SUITE_P(Models, DeviceGolden,
                         ::testing::Values("llama", "qwen2", "qwen3", "llama31", "mistral", "gemma2", "gemma3",
                                           "phi3"));

// Simple samplers (temperature alone, greedy) and forced tokens: the engine lets the device choose the
// tokens of its decode steps (no logits come back); the result is the CPU engine's, bit for bit.
std::vector<rollout::Completion> simple_rollouts(Transformer& m) {
  KvPool pool(m.config(), 4, 128);
  rollout::RolloutEngine eng(m, pool);
  auto sampled = request({6, 5, 4, 3, 2, 9}, 3, 12, 5);
  sampled.sampler.temperature = 0.8f;
  sampled.sampler.top_p = 1.f;
  auto greedy = request({1, 2, 3, 4, 5, 6, 7}, 1, 10, 8);
  greedy.sampler.greedy = true;
  auto forced = request({3, 1, 4}, 2, 9, 2);
  forced.sampler.top_p = 1.f;
  forced.forced = {7, 7, 2};
  return eng.run({sampled, greedy, forced});
}

TEST(DeviceModel, TokensChosenOnTheDeviceEqualTheCpuEngineBitForBit) {
  test::RandomModel f;
  auto cpu = simple_rollouts(f.model);
  Transformer on_device(f.cfg);
  auto dev = copy_onto_mirror(f.model, on_device);
  auto got = simple_rollouts(on_device);
  EXPECT_GT(dev->chosen_steps, 5);  // the decode steps chose on the device
  ASSERT_EQ(got.size(), cpu.size());
  for (size_t i = 0; i < cpu.size(); ++i) {
    EXPECT_EQ(got[i].tokens, cpu[i].tokens) << "completion " << i;
    EXPECT_EQ(got[i].sample_logprob, cpu[i].sample_logprob) << "completion " << i;
    EXPECT_EQ(got[i].policy_logprob, cpu[i].policy_logprob) << "completion " << i;
    EXPECT_EQ(got[i].entropy, cpu[i].entropy) << "completion " << i;
    EXPECT_EQ(got[i].forced, cpu[i].forced) << "completion " << i;
  }
  EXPECT_EQ(cpu.back().forced, 3);
}

// Speculative rollouts (EfficientRollout) through a device: the drafter's passes go to the device too
// (forward_paged_draft), over the mirrored pool; drafts, acceptances and the policy's verify pass give the CPU
// engine's completions bit for bit. The drafter quantizes a device-attached model in the device's layout (the
// mirror's is the CPU's).
std::vector<rollout::Completion> speculative_rollouts(Transformer& m, rollout::EngineStats* stats) {
  Int4Drafter drafter;
  drafter.refresh(m);
  rollout::SpecConfig sc;
  sc.ladder = {4};
  sc.toggle = rollout::SpecToggle::always;
  rollout::SpecController spec(sc);
  KvPool pool(m.config(), 4, 128);
  rollout::EngineConfig ec(16);
  ec.drafter = &drafter;
  ec.spec = &spec;
  rollout::RolloutEngine eng(m, pool, ec);
  auto out = eng.run({request({6, 5, 4, 3, 2, 9}, 3, 12, 5), request({1, 2, 3, 4, 5, 6, 7}, 2, 10, 8)});
  *stats = eng.stats();
  return out;
}

TEST(DeviceModel, SpeculativeRolloutsThroughAMirroredDeviceEqualTheCpuEngineBitForBit) {
  test::RandomModel f;
  rollout::EngineStats cpu_stats, dev_stats;
  auto cpu = speculative_rollouts(f.model, &cpu_stats);
  Transformer on_device(f.cfg);
  auto dev = copy_onto_mirror(f.model, on_device);
  auto got = speculative_rollouts(on_device, &dev_stats);
  EXPECT_GT(dev->drafted_steps, 0);  // the drafter's passes ran on the device
  EXPECT_GT(cpu_stats.spec_cycles, 0);
  EXPECT_EQ(dev_stats.drafted, cpu_stats.drafted);
  EXPECT_EQ(dev_stats.accepted, cpu_stats.accepted);
  ASSERT_EQ(got.size(), cpu.size());
  for (size_t i = 0; i < cpu.size(); ++i) {
    EXPECT_EQ(got[i].tokens, cpu[i].tokens) << "completion " << i;
    EXPECT_EQ(got[i].policy_logprob, cpu[i].policy_logprob) << "completion " << i;
  }
}

class SumLogprob : public kernels::ClassifierLoss {
 public:
  void coefs(int64_t n, float, float, float* g_lp, float* g_ent) const override {
    *g_lp = (n % 3 == 0) ? -0.2f : 0.1f;
    *g_ent = 0.01f;
  }
};

TEST(DeviceModel, OptimizerStepsOnTheDeviceEqualTheCpuAndWeightsMoveBothWays) {
  test::RandomModel f;
  Transformer cpu(f.cfg), gpu(f.cfg);
  for (Transformer* m : {&cpu, &gpu}) {
    std::memcpy(m->params(), f.model.params(), sizeof(float) * static_cast<size_t>(f.model.flat_size()));
    m->params_updated();
  }
  auto dev = std::make_shared<MirrorDevice>(f.cfg);
  gpu.attach_device(dev);
  EXPECT_EQ(dev->pushes, 1);
  OptimizerConfig oc;
  oc.lr.peak = 1e-2;
  Optimizer ocpu(cpu, oc), ogpu(gpu, oc);
  const int64_t B = 2, T = 9;
  std::vector<int32_t> tok(B * T), tgt(B * T);
  for (int64_t i = 0; i < B * T; ++i) {
    tok[i] = static_cast<int32_t>((i * 7 + 3) % f.cfg.vocab_size);
    tgt[i] = static_cast<int32_t>((i * 5 + 1) % f.cfg.vocab_size);
  }
  SumLogprob loss;
  std::vector<float> lp1(B * T), e1(B * T), lp2(B * T), e2(B * T);
  for (int step = 0; step < 3; ++step) {
    cpu.zero_grad();
    gpu.zero_grad();
    cpu.forward_backward(tok.data(), tgt.data(), B, T, loss, lp1.data(), e1.data());
    gpu.forward_backward(tok.data(), tgt.data(), B, T, loss, lp2.data(), e2.data());
    EXPECT_EQ(lp1, lp2);
    const int pulls = dev->pulls;
    auto s1 = ocpu.step();
    auto s2 = ogpu.step();
    EXPECT_EQ(dev->pulls, pulls);  // stepping does not bring the weights back
    EXPECT_EQ(s1.grad_norm, s2.grad_norm);
  }
  const size_t n = static_cast<size_t>(cpu.flat_size());
  EXPECT_EQ(std::memcmp(cpu.params(), gpu.params(), n * sizeof(float)), 0);  // pulled here, lazily
  EXPECT_EQ(dev->pulls, 1);
  EXPECT_EQ(std::memcmp(ocpu.m(), ogpu.m(), n * sizeof(float)), 0);
  EXPECT_EQ(std::memcmp(ocpu.v(), ogpu.v(), n * sizeof(float)), 0);
  EXPECT_EQ(ogpu.steps_done(), 3);
  // A host write (loading weights) reaches the device: the next forward sees it.
  gpu.params()[0] += 1.0f;
  cpu.params()[0] += 1.0f;
  gpu.params_updated();
  cpu.params_updated();
  cpu.forward_logprobs(tok.data(), tgt.data(), B, T, lp1.data(), e1.data());
  gpu.forward_logprobs(tok.data(), tgt.data(), B, T, lp2.data(), e2.data());
  EXPECT_EQ(lp1, lp2);
}

// Recomputation reaches the device, set before or after attaching it: the device's training pass recomputes and
// gives the CPU's stored-path gradients bit for bit.
TEST(DeviceModel, RecomputeReachesTheDeviceAndGivesTheStoredPathsGradients) {
  test::RandomModel f;
  const int64_t B = 2, T = 11, N = B * T;
  std::vector<int32_t> tok(N), tgt(N);
  for (int64_t i = 0; i < N; ++i) {
    tok[i] = static_cast<int32_t>((i * 7 + 3) % f.cfg.vocab_size);
    tgt[i] = static_cast<int32_t>((i * 5 + 1) % f.cfg.vocab_size);
  }
  SumLogprob loss;
  std::vector<float> lp(N), ent(N), dlp(N), dent(N);
  f.model.zero_grad();
  f.model.forward_backward(tok.data(), tgt.data(), B, T, loss, lp.data(), ent.data());
  const std::vector<float> want(f.model.grads(), f.model.grads() + f.model.flat_size());
  for (bool before : {true, false}) {
    SCOPED_TRACE(before ? "set before attaching" : "set after attaching");
    Transformer copy(f.cfg);
    if (before) copy.set_recompute(true);
    std::shared_ptr<MirrorDevice> dev = copy_onto_mirror(f.model, copy);
    if (!before) copy.set_recompute(true);
    EXPECT_TRUE(dev->recompute());
    copy.zero_grad();
    copy.forward_backward(tok.data(), tgt.data(), B, T, loss, dlp.data(), dent.data());
    EXPECT_EQ(lp, dlp);
    EXPECT_EQ(ent, dent);
    EXPECT_EQ(std::memcmp(copy.grads(), want.data(), want.size() * sizeof(float)), 0);
    copy.set_recompute(false);
    EXPECT_FALSE(dev->recompute());
  }
}

TEST(DeviceModel, DeviceNamesAreCheckedAndCpuMeansNone) {
  EXPECT_TRUE(device_name_valid("cpu"));
  EXPECT_TRUE(device_name_valid("cuda"));
  EXPECT_TRUE(device_name_valid("cuda:3"));
  EXPECT_FALSE(device_name_valid("gpu"));
  EXPECT_FALSE(device_name_valid("cuda:"));
  EXPECT_FALSE(device_name_valid("cuda:x"));
  EXPECT_TRUE(device_name_valid("mirror"));
  EXPECT_NE(make_device_model(test::small_config(Arch::llama), "mirror"), nullptr);
  EXPECT_EQ(make_device_model(test::small_config(Arch::llama), "cpu"), nullptr);
  EXPECT_THROW(make_device_model(test::small_config(Arch::llama), "tpu"), Error);
}

}  // namespace
}  // namespace temper
