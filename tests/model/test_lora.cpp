// LoRA adapters on the CPU decoder (model/lora.h): a fresh adapter (B = 0) leaves the logits unchanged; with
// random A and B the model equals one whose weights were merged (W + scale B A), its gradients equal the merged
// model's (dA = scale B^T dW, dB = scale dW A^T, every base gradient and the embedding's the same) and finite
// differences; the frozen base gets no weight gradients; rollout log-probs from the paged forward equal the training
// forward's; recomputation and packed batches give the stored path's gradients. Every family of the golden shape.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <tuple>

#include "common/models.h"
#include "common/tolerance.h"
#include "model/lora_fixture.h"
#include "temper/core/error.h"
#include "temper/core/rng.h"
#include "temper/io/peft_adapter.h"
#include "temper/io/safetensors.h"
#include "temper/kernels/classifier.h"
#include "temper/model/activation_store.h"
#include "temper/model/kv_pool.h"
#include "temper/model/lora.h"
#include "temper/model/mirror_device.h"
#include "temper/model/transformer.h"

using namespace temper;
using namespace temper::test;

namespace {

const std::vector<LoraTarget>& kAll = kAllLoraTargets;
const auto& kArchs = kLoraArchs;

LoraConfig lora_config(std::vector<LoraTarget> targets = kAll, int64_t rank = 4, double alpha = 8) {
  LoraConfig c;
  c.rank = rank;
  c.alpha = alpha;
  c.targets = std::move(targets);
  return c;
}

// PEFT's init, then B drawn N(0, std) so the adapters change the model.
int64_t weight_offset(const Transformer& m, int64_t l, LoraTarget t) {
  const LayerOffsets& o = m.layout().layers[static_cast<size_t>(l)];
  switch (t) {
    case LoraTarget::q:
    case LoraTarget::k:
    case LoraTarget::v:
      return o.w_qkv;
    case LoraTarget::o:
      return o.w_o;
    case LoraTarget::gate:
    case LoraTarget::up:
      return o.w_gu;
    case LoraTarget::down:
      return o.w_down;
  }
  return -1;
}

// The merged model, in double: W[row0 + i, j] += scale sum_k B[i, k] A[k, j].
void merge_by_hand(const LoraAdapters& ad, Transformer& m) {
  const int64_t r = ad.rank();
  for (int64_t l = 0; l < m.config().num_layers; ++l)
    for (LoraTarget t : ad.config().targets) {
      const LoraProduct& p = *ad.find(l, t);
      const float *A = ad.params() + p.a, *Bm = ad.params() + p.b;
      float* W = m.params() + weight_offset(m, l, t) + p.row0 * p.in;
      for (int64_t i = 0; i < p.out; ++i)
        for (int64_t j = 0; j < p.in; ++j) {
          double s = 0;
          for (int64_t k = 0; k < r; ++k) s += static_cast<double>(Bm[i * r + k]) * A[k * p.in + j];
          W[i * p.in + j] = static_cast<float>(W[i * p.in + j] + ad.scale() * s);
        }
    }
  m.params_updated();
}

}  // namespace

TEST(Lora, ConfigIsValidatedAndNamesTargets) {
  LoraConfig c = lora_config();
  EXPECT_NO_THROW(c.validate());
  EXPECT_DOUBLE_EQ(c.scale(), 2.0);
  c.use_rslora = true;
  EXPECT_DOUBLE_EQ(c.scale(), 4.0);
  LoraConfig d = lora_config();
  d.dropout = 0.05;
  EXPECT_THROW(d.validate(), Error);
  LoraConfig e = lora_config({LoraTarget::q, LoraTarget::q});
  EXPECT_THROW(e.validate(), Error);
  LoraConfig f = lora_config({});
  EXPECT_THROW(f.validate(), Error);
  LoraConfig g = lora_config(kAll, 0);
  EXPECT_THROW(g.validate(), Error);
  LoraTarget t;
  ASSERT_TRUE(lora_target_from_name("gate", &t));
  EXPECT_EQ(t, LoraTarget::gate);
  ASSERT_TRUE(lora_target_from_name("down_proj", &t));
  EXPECT_EQ(t, LoraTarget::down);
  EXPECT_FALSE(lora_target_from_name("qkv", &t));
  EXPECT_EQ(lora_target_module(LoraTarget::up), "mlp.up_proj");
}

TEST(Lora, InitIsPeftsAndTheLayoutIsFlat) {
  ModelConfig cfg = small_config(Arch::llama);
  LoraAdapters ad(cfg, lora_config(kAll, 4));
  // Per layer: A and B of 7 targets: q/k/v/gate/up read C = 64, o reads Hq = 64, down reads F = 88.
  const int64_t C = 64, Hq = 64, Hk = 32, F = 88, r = 4;
  int64_t per_layer = r * (3 * C + Hq + 2 * C + F) + r * (Hq + 2 * Hk + C + 2 * F + C);
  EXPECT_GE(ad.size(), 2 * per_layer);
  EXPECT_LE(ad.size(), 2 * per_layer + 2 * 4 * 15);
  ad.init(3);
  for (int64_t l = 0; l < 2; ++l)
    for (LoraTarget t : kAll) {
      Tensor a = ad.a(l, t), b = ad.b(l, t);
      const double bound = 1.0 / std::sqrt(static_cast<double>(a.shape()[1]));
      EXPECT_LE(max_abs(a.data<float>(), a.numel()), bound);
      EXPECT_GT(max_abs(a.data<float>(), a.numel()), 0.8 * bound);  // U(-bound, bound) fills the range
      EXPECT_EQ(max_abs(b.data<float>(), b.numel()), 0.0);
    }
  LoraAdapters other(cfg, lora_config(kAll, 4));
  other.init(3);
  EXPECT_EQ(std::memcmp(other.params(), ad.params(), sizeof(float) * static_cast<size_t>(ad.size())), 0);
  // Only the named targets exist.
  LoraAdapters qv(cfg, lora_config({LoraTarget::q, LoraTarget::v}));
  EXPECT_NE(qv.find(1, LoraTarget::v), nullptr);
  EXPECT_EQ(qv.find(1, LoraTarget::k), nullptr);
  EXPECT_THROW(qv.a(1, LoraTarget::k), Error);
  EXPECT_EQ(qv.find(0, LoraTarget::v)->row0, Hq + Hk);
}

// (a) B = 0 at init: the logits are the model's, bit for bit.
TEST(Lora, FreshAdaptersLeaveTheLogitsUnchanged) {
  for (Arch arch : kArchs) {
    ModelConfig cfg = family_config(arch);
    Transformer m(cfg);
    m.init_random(42, 0.1f);
    Batch b(cfg, 1);
    std::vector<float> base = logits(m, b);
    LoraAdapters ad(cfg, lora_config());
    ad.init(7);
    m.attach_lora(&ad);
    std::vector<float> with = logits(m, b);
    EXPECT_EQ(std::memcmp(base.data(), with.data(), sizeof(float) * base.size()), 0) << arch_name(arch);
  }
}

// (b) Random A and B: the logits of the merged model (W + scale B A) within 1e-5; merge_into agrees.
TEST(Lora, AdaptersEqualTheMergedModel) {
  for (Arch arch : kArchs)
    for (bool rslora : {false, true}) {
      ModelConfig cfg = family_config(arch);
      Transformer m(cfg);
      m.init_random(42, 0.1f);
      Batch b(cfg, 2);
      std::vector<float> base = logits(m, b);
      LoraConfig lc = lora_config(rslora ? std::vector<LoraTarget>{LoraTarget::k, LoraTarget::o, LoraTarget::up} : kAll,
                                  rslora ? 3 : 4);
      lc.use_rslora = rslora;
      LoraAdapters ad(cfg, lc);
      randomize(ad, 11);
      auto merged = copy_of(m);
      merge_by_hand(ad, *merged);
      m.attach_lora(&ad);
      std::vector<float> got = logits(m, b), want = logits(*merged, b);
      const int64_t n = static_cast<int64_t>(got.size());
      EXPECT_TRUE(all_close(got.data(), want.data(), n, 1e-5)) << arch_name(arch) << " rslora " << rslora;
      // The adapters matter: the logits moved far beyond that tolerance.
      double moved = 0;
      for (int64_t i = 0; i < n; ++i) moved = std::max(moved, std::fabs(static_cast<double>(got[i]) - base[i]));
      EXPECT_GT(moved, 1e-2) << arch_name(arch);
      auto merged2 = copy_of(m);
      ad.merge_into(*merged2);
      std::vector<float> want2 = logits(*merged2, b);
      EXPECT_TRUE(all_close(want2.data(), want.data(), n, 1e-5)) << arch_name(arch);
      m.attach_lora(nullptr);  // detached: the base model again
      std::vector<float> again = logits(m, b);
      EXPECT_EQ(std::memcmp(again.data(), base.data(), sizeof(float) * base.size()), 0) << arch_name(arch);
    }
}

// (c) Gradients: the base's and the embedding's equal the merged model's; dA = scale B^T G and dB = scale G A^T
// with G the merged weight's gradient; with the base frozen the four products' dW stay zero and everything else
// is unchanged; finite differences agree on A and B.
TEST(Lora, GradientsMatchTheMergedModelAndFiniteDifferences) {
  for (Arch arch : kArchs) {
    ModelConfig cfg = family_config(arch);
    Transformer m(cfg);
    m.init_random(42, 0.1f);
    LoraAdapters ad(cfg, lora_config());
    randomize(ad, 13);
    auto merged = copy_of(m);
    merge_by_hand(ad, *merged);
    m.attach_lora(&ad);
    Batch b(cfg, 3);
    WeightedLoss loss(b.N());
    Grads g = train_pass(m, &ad, b, loss), gm = train_pass(*merged, nullptr, b, loss);
    EXPECT_TRUE(all_close(g.lp.data(), gm.lp.data(), b.N(), 1e-5)) << arch_name(arch);
    EXPECT_TRUE(all_close(g.model.data(), gm.model.data(), m.flat_size(), tolerance(Kind::reduction, b.N(), 3)))
        << arch_name(arch);
    const ParamEntry& emb = m.layout().at("model.embed_tokens.weight");
    EXPECT_GT(max_abs(g.model.data() + emb.offset, emb.numel()), 1e-3) << arch_name(arch);
    // dA, dB from the merged gradient G (rows row0.. of the fused weight's gradient).
    const int64_t r = ad.rank();
    for (int64_t l = 0; l < cfg.num_layers; ++l)
      for (LoraTarget t : kAll) {
        const LoraProduct& p = *ad.find(l, t);
        const float* G = gm.model.data() + weight_offset(m, l, t) + p.row0 * p.in;
        const float *A = ad.params() + p.a, *Bm = ad.params() + p.b;
        std::vector<double> da(static_cast<size_t>(r * p.in), 0.0), db(static_cast<size_t>(p.out * r), 0.0);
        for (int64_t i = 0; i < p.out; ++i)
          for (int64_t j = 0; j < p.in; ++j)
            for (int64_t k = 0; k < r; ++k) {
              da[static_cast<size_t>(k * p.in + j)] +=
                  ad.scale() * static_cast<double>(Bm[i * r + k]) * G[i * p.in + j];
              db[static_cast<size_t>(i * r + k)] += ad.scale() * static_cast<double>(G[i * p.in + j]) * A[k * p.in + j];
            }
        EXPECT_TRUE(all_close(g.lora.data() + p.a, da.data(), r * p.in, tolerance(Kind::reduction, b.N(), 3)))
            << arch_name(arch) << " layer " << l << " dA " << lora_target_name(t);
        EXPECT_TRUE(all_close(g.lora.data() + p.b, db.data(), p.out * r, tolerance(Kind::reduction, b.N(), 3)))
            << arch_name(arch) << " layer " << l << " dB " << lora_target_name(t);
      }
    // Frozen base: the same adapter gradients (so the same input gradients), and no base gradient formed at all
    // (the products' dW, the embedding's, the LM head's, the norms', the biases'): the buffer reads zero.
    m.set_base_frozen(true);
    Grads f = train_pass(m, &ad, b, loss);
    EXPECT_EQ(f.lora, g.lora) << arch_name(arch);
    int64_t checked = 0;
    for (const ParamEntry& e : m.layout().entries()) {
      EXPECT_EQ(max_abs(f.model.data() + e.offset, e.numel()), 0.0) << arch_name(arch) << " " << e.name;
      EXPECT_GT(max_abs(g.model.data() + e.offset, e.numel()), 0.0) << arch_name(arch) << " " << e.name;
      ++checked;
    }
    EXPECT_GE(checked, 4 * cfg.num_layers) << arch_name(arch);
    m.set_base_frozen(false);
    // Finite differences on the loss, at the largest analytic entries of A and B of two adapters.
    auto objective = [&]() {
      std::vector<float> lp(static_cast<size_t>(b.N())), ent(static_cast<size_t>(b.N()));
      m.forward_logprobs(b.tokens.data(), b.targets.data(), b.B, b.T, lp.data(), ent.data());
      return loss.value(lp, ent);
    };
    expect_adapter_gradients_match_differences(ad, g.lora, objective, arch);
  }
}

// (d) The rollout invariant with adapters: the paged forward (a prefill chunk, then one token per step, two
// sequences per step) gives the training forward's log-probs; f32 within 1e-5, bf16 within the bf16 tolerance.
TEST(Lora, PagedForwardLogprobsEqualTheTrainingForward) {
  for (Arch arch : {Arch::llama, Arch::qwen3, Arch::gemma2})
    for (kernels::Precision prec : {kernels::Precision::f32, kernels::Precision::bf16}) {
      ModelConfig cfg = family_config(arch);
      Transformer m(cfg);
      m.init_random(42, 0.1f);
      m.set_precision(prec);
      LoraAdapters ad(cfg, lora_config());
      randomize(ad, 17);
      m.attach_lora(&ad);
      const int64_t S = 2, T = 19;
      Batch b(cfg, 4, S, T);
      std::vector<float> want(static_cast<size_t>(S * T)), ent(static_cast<size_t>(S * T));
      m.forward_logprobs(b.tokens.data(), b.targets.data(), S, T, want.data(), ent.data());
      const std::vector<float> got = paged_logprobs(m, b, prec);
      const double tol = prec == kernels::Precision::f32 ? 1e-5 : tolerance(Kind::bf16, cfg.hidden_size);
      EXPECT_TRUE(all_close(got.data(), want.data(), S * T, tol))
          << arch_name(arch) << " " << kernels::precision_name(prec);
    }
}

// (e) Recomputation on and off: the same gradients, bit for bit (model and adapters); frozen base too.
TEST(Lora, RecomputeGivesTheStoredPathsGradients) {
  for (Arch arch : {Arch::llama, Arch::qwen3, Arch::gemma2})
    for (bool frozen : {false, true}) {
      ModelConfig cfg = family_config(arch);
      Transformer m(cfg);
      m.init_random(42, 0.1f);
      m.set_base_frozen(frozen);
      LoraAdapters ad(cfg, lora_config());
      randomize(ad, 19);
      m.attach_lora(&ad);
      Batch b(cfg, 5);
      WeightedLoss loss(b.N());
      Grads stored = train_pass(m, &ad, b, loss);
      m.set_recompute(true);
      Grads re = train_pass(m, &ad, b, loss);
      EXPECT_EQ(re.lora, stored.lora) << arch_name(arch) << " frozen " << frozen;
      if (frozen)  // no base gradient formed on either path
        EXPECT_EQ(max_abs(re.model.data(), m.flat_size()), 0.0) << arch_name(arch);
      else
        EXPECT_EQ(re.model, stored.model) << arch_name(arch);
      EXPECT_EQ(re.lp, stored.lp) << arch_name(arch);
      EXPECT_GT(max_abs(re.lora.data(), ad.size()), 1e-3);
      // A second pass without zeroing accumulates (micro-batches): twice the gradients.
      std::vector<float> lp(static_cast<size_t>(b.N())), ent(static_cast<size_t>(b.N())), twice;
      m.forward_backward(b.tokens.data(), b.targets.data(), b.B, b.T, loss, lp.data(), ent.data());
      for (float v : re.lora) twice.push_back(2 * v);
      EXPECT_TRUE(all_close(ad.grads(), twice.data(), ad.size(), 1e-6)) << arch_name(arch);
    }
}

// Packed batches: rows sharing a prompt hold it once; the adapters' gradients equal the padded batch's.
TEST(Lora, PackedBatchesGiveThePaddedBatchsGradients) {
  for (Arch arch : {Arch::llama, Arch::qwen2}) {
    ModelConfig cfg = family_config(arch);
    Transformer m(cfg);
    m.init_random(42, 0.1f);
    LoraAdapters ad(cfg, lora_config());
    randomize(ad, 23);
    m.attach_lora(&ad);
    // Two rows of 12 tokens that share a 5-token prompt; no loss on the prompt's rows (in the padded batch they
    // appear twice, packed once).
    const int64_t P = 5, T = 12;
    Batch b(cfg, 6, 2, T);
    std::copy(b.tokens.begin(), b.tokens.begin() + P, b.tokens.begin() + T);
    for (int64_t r = 0; r < 2; ++r)
      for (int64_t t = 0; t + 1 < T; ++t)
        b.targets[static_cast<size_t>(r * T + t)] = b.tokens[static_cast<size_t>(r * T + t + 1)];
    WeightedLoss loss(b.N());
    for (int64_t r = 0; r < 2; ++r)
      for (int64_t t = 0; t < P; ++t) {
        b.targets[static_cast<size_t>(r * T + t)] = -1;
        loss.w[static_cast<size_t>(r * T + t)] = 0.f;
      }
    Grads padded = train_pass(m, &ad, b, loss);
    // Packed: the prompt (P rows) once, then each row's own T - P tokens reading it.
    std::vector<int32_t> tok(b.tokens.begin(), b.tokens.begin() + P), tgt(P, -1);
    WeightedLoss ploss(P);
    std::fill(ploss.w.begin(), ploss.w.end(), 0.f);
    for (int64_t r = 0; r < 2; ++r)
      for (int64_t t = P; t < T; ++t) {
        tok.push_back(b.tokens[static_cast<size_t>(r * T + t)]);
        tgt.push_back(b.targets[static_cast<size_t>(r * T + t)]);
        ploss.w.push_back(loss.w[static_cast<size_t>(r * T + t)]);
      }
    std::vector<kernels::AttnSegment> segs(3);
    segs[0].start = 0;
    segs[0].len = P;
    for (int r = 0; r < 2; ++r) {
      segs[1 + r].start = P + r * (T - P);
      segs[1 + r].len = T - P;
      segs[1 + r].prefix_start = 0;
      segs[1 + r].prefix_len = P;
    }
    m.zero_grad();
    ad.zero_grad();
    std::vector<float> lp(tok.size()), ent(tok.size());
    m.forward_backward_packed(tok.data(), tgt.data(), segs, ploss, lp.data(), ent.data());
    std::vector<float> pg(ad.grads(), ad.grads() + ad.size());
    EXPECT_TRUE(all_close(pg.data(), padded.lora.data(), ad.size(), tolerance(Kind::reduction, b.N(), 3)))
        << arch_name(arch);
    EXPECT_GT(max_abs(pg.data(), ad.size()), 1e-3);
    for (int64_t r = 0; r < 2; ++r)
      for (int64_t t = P; t < T; ++t)
        EXPECT_NEAR(lp[static_cast<size_t>(P + r * (T - P) + t - P)], padded.lp[static_cast<size_t>(r * T + t)], 1e-5)
            << arch_name(arch) << " row " << r << " t " << t;
  }
}

TEST(Lora, RefusedWhereNotSupported) {
  ModelConfig cfg = small_config(Arch::qwen3);
  Transformer m(cfg);
  m.init_random(1);
  ModelConfig other = cfg;
  other.intermediate_size = 96;
  LoraAdapters wrong(other, lora_config());
  EXPECT_THROW(m.attach_lora(&wrong), Error);
  LoraAdapters ad(cfg, lora_config());
  m.attach_lora(&ad);
  // A device runs the base only: attaching one with adapters is refused, and adapters with a device.
  EXPECT_THROW(m.attach_device(std::make_shared<MirrorDevice>(cfg)), Error);
  m.attach_lora(nullptr);
  m.attach_device(std::make_shared<MirrorDevice>(cfg));
  EXPECT_THROW(m.attach_lora(&ad), Error);
  m.attach_device(nullptr);
  // Kept rollout activations are not reused with adapters (their updates do not move the weights' version).
  m.attach_lora(&ad);
  ActivationStore store(m.act_field_widths());
  store.reset(4, m.params_version());
  EXPECT_FALSE(m.reusable(store));
  m.attach_lora(nullptr);
  EXPECT_TRUE(m.reusable(store));
}

// PEFT's format (io/peft_adapter.h): written as PEFT names it and read back bit for bit; bf16 tensors; what
// temper's adapters cannot hold is refused naming the file and the field or tensor.
namespace {

std::string scratch_dir(const std::string& name) {
  std::string d = ::testing::TempDir() + "temper_lora_" + name + "_" + std::to_string(::getpid());
  std::filesystem::remove_all(d);
  return d;
}

void edit_config(const std::string& dir, const std::function<void(nlohmann::json&)>& f) {
  const std::string path = dir + "/adapter_config.json";
  nlohmann::json j = nlohmann::json::parse(std::ifstream(path));
  f(j);
  std::ofstream(path) << j.dump(2);
}

}  // namespace

TEST(LoraPeft, WritesPeftsNamesAndReadsThemBack) {
  ModelConfig cfg = family_config(Arch::qwen2);
  LoraConfig lc = lora_config({LoraTarget::q, LoraTarget::v, LoraTarget::gate, LoraTarget::down}, 4, 8);
  LoraAdapters ad(cfg, lc);
  randomize(ad, 29);
  const std::string dir = scratch_dir("write");
  io::write_peft_adapter(ad, dir, {.base_model_name_or_path = "tiny"});
  const nlohmann::json j = nlohmann::json::parse(std::ifstream(dir + "/adapter_config.json"));
  EXPECT_EQ(j.at("peft_type"), "LORA");
  EXPECT_EQ(j.at("task_type"), "CAUSAL_LM");
  EXPECT_EQ(j.at("r"), 4);
  EXPECT_EQ(j.at("lora_alpha"), 8);
  EXPECT_EQ(j.at("lora_dropout"), 0.0);
  EXPECT_EQ(j.at("bias"), "none");
  EXPECT_EQ(j.at("use_rslora"), false);
  EXPECT_EQ(j.at("target_modules"), nlohmann::json({"q_proj", "v_proj", "gate_proj", "down_proj"}));
  io::SafetensorsFile f = io::SafetensorsFile::open(dir + "/adapter_model.safetensors");
  EXPECT_EQ(f.names().size(), static_cast<size_t>(2 * 4 * cfg.num_layers));
  Tensor a = f.get("base_model.model.model.layers.1.self_attn.v_proj.lora_A.weight");
  Tensor b = f.get("base_model.model.model.layers.1.mlp.down_proj.lora_B.weight");
  EXPECT_EQ(a.shape(), Shape({4, cfg.hidden_size}));
  EXPECT_EQ(b.shape(), Shape({cfg.hidden_size, 4}));
  EXPECT_EQ(std::memcmp(a.data<float>(), ad.a(1, LoraTarget::v).data<float>(), sizeof(float) * a.numel()), 0);
  std::unique_ptr<LoraAdapters> back = io::read_peft_adapter(dir, cfg);
  EXPECT_EQ(back->config().targets, lc.targets);
  EXPECT_EQ(back->scale(), ad.scale());
  ASSERT_EQ(back->size(), ad.size());
  EXPECT_EQ(std::memcmp(back->params(), ad.params(), sizeof(float) * ad.size()), 0);
  // Resuming into existing adapters; bf16 files within bf16 rounding.
  LoraAdapters resumed(cfg, lc);
  io::load_peft_adapter_weights(resumed, dir);
  EXPECT_EQ(std::memcmp(resumed.params(), ad.params(), sizeof(float) * ad.size()), 0);
  const std::string dir16 = scratch_dir("bf16");
  io::PeftWriteOptions o16;
  o16.dtype = DType::bf16;
  io::write_peft_adapter(ad, dir16, o16);
  EXPECT_EQ(io::SafetensorsFile::open(dir16 + "/adapter_model.safetensors")
                .get(io::peft_tensor_name(0, LoraTarget::q, true))
                .dtype(),
            DType::bf16);
  std::unique_ptr<LoraAdapters> b16 = io::read_peft_adapter(dir16, cfg);
  EXPECT_TRUE(all_close(b16->params(), ad.params(), ad.size(), tolerance(Kind::bf16)));
  // merge_peft_adapter: the model then computes what model + adapters did.
  Transformer m(cfg);
  m.init_random(42, 0.1f);
  Batch batch(cfg, 8);
  m.attach_lora(&ad);
  std::vector<float> want = logits(m, batch);
  m.attach_lora(nullptr);
  io::merge_peft_adapter(m, dir);
  std::vector<float> got = logits(m, batch);
  EXPECT_TRUE(all_close(got.data(), want.data(), static_cast<int64_t>(got.size()), 1e-5));
  std::filesystem::remove_all(dir);
  std::filesystem::remove_all(dir16);
}

TEST(LoraPeft, RefusesWhatTheAdaptersCannotHold) {
  ModelConfig cfg = small_config(Arch::llama);
  LoraConfig lc = lora_config({LoraTarget::q, LoraTarget::v});
  LoraAdapters ad(cfg, lc);
  randomize(ad, 31);
  const std::string dir = scratch_dir("refuse");
  auto fresh = [&] {
    std::filesystem::remove_all(dir);
    io::write_peft_adapter(ad, dir);
  };
  auto refused = [&](const std::string& needle) {
    std::string msg;
    try {
      io::read_peft_adapter(dir, cfg);
    } catch (const Error& e) {
      msg = e.what();
    }
    EXPECT_NE(msg.find(needle), std::string::npos) << "wanted '" << needle << "' in: " << msg;
  };
  // Config fields.
  for (auto [field, value, needle] : std::vector<std::tuple<std::string, nlohmann::json, std::string>>{
           {"use_dora", true, "use_dora"},
           {"bias", "all", "'bias'"},
           {"rank_pattern", {{"q_proj", 8}}, "rank_pattern"},
           {"layers_to_transform", {0}, "layers_to_transform"},
           {"modules_to_save", {"lm_head"}, "modules_to_save"},
           {"target_modules", ".*q_proj", "pattern"},
           {"target_modules", {"q_proj", "lm_head"}, "lm_head"},
           {"peft_type", "IA3", "peft_type"},
           {"lora_dropout", 0.05, "lora_dropout"}}) {
    fresh();
    edit_config(dir, [&](nlohmann::json& j) { j[field] = value; });
    refused(needle);
  }
  // Dropout is ignored where asked (inference, merging).
  EXPECT_NO_THROW(io::read_peft_adapter(dir, cfg, {.ignore_dropout = true}));
  // "all-linear" means every target: the file then lacks k's tensors.
  fresh();
  edit_config(dir, [](nlohmann::json& j) { j["target_modules"] = "all-linear"; });
  refused("model.layers.0.self_attn.k_proj.lora_A.weight' missing");
  // Shapes of another model, a missing tensor, an unexpected one, a rank that differs from the run's.
  ModelConfig wide = cfg;
  wide.hidden_size = 96;
  LoraAdapters other(wide, lc);
  std::filesystem::remove_all(dir);
  io::write_peft_adapter(other, dir);
  refused(
      "tensor 'base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight' has shape [4, 96], expected [4, 64]");
  ModelConfig deep = cfg;
  deep.num_layers = 3;
  LoraAdapters three(deep, lc);
  std::filesystem::remove_all(dir);
  io::write_peft_adapter(three, dir);
  refused("unexpected tensor 'base_model.model.model.layers.2.self_attn.q_proj.lora_A.weight'");
  LoraAdapters rank8(cfg, lora_config({LoraTarget::q, LoraTarget::v}, 8));
  fresh();
  EXPECT_THROW(io::load_peft_adapter_weights(rank8, dir), Error);
  LoraAdapters more(cfg, lora_config({LoraTarget::q, LoraTarget::v, LoraTarget::o}));
  EXPECT_THROW(io::load_peft_adapter_weights(more, dir), Error);
  std::filesystem::remove(dir + "/adapter_model.safetensors");
  std::ofstream(dir + "/adapter_model.bin") << "pickle";
  refused("adapter_model.bin");
  // Phi-3's fused q/k/v and gate/up have no PEFT names per q, k, v; o and down do.
  ModelConfig phi = family_config(Arch::phi3);
  EXPECT_THROW(io::write_peft_adapter(LoraAdapters(phi, lc), dir), Error);
  EXPECT_NO_THROW(io::write_peft_adapter(LoraAdapters(phi, lora_config({LoraTarget::o, LoraTarget::down})), dir));
  std::filesystem::remove_all(dir);
}
