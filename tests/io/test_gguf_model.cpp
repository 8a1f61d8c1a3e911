// GGUF models: config from metadata and its errors, the HF <-> llama.cpp name map, the llama q/k
// row permutation, export -> reload of the three tiny golden models (F32 exact, F16/Q8_0 within
// their error), loader errors, and SmolLM2-135M-Instruct (Q4_1 GGUF from llama.cpp): config,
// tokenizer metadata, and logits against transformers loading the same file (the golden of
// tools/ref/make_gguf_goldens.py). The SmolLM2 tests skip when .cache/models lacks the file.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <tuple>

#include "common/scratch.h"
#include "common/test_data.h"
#include "temper/core/error.h"
#include "temper/io/gguf_export.h"
#include "temper/io/gguf_file.h"
#include "temper/io/gguf_model.h"
#include "temper/io/gguf_writer.h"
#include "temper/io/hf_config.h"
#include "temper/io/hf_weights.h"
#include "temper/io/safetensors.h"

using namespace temper;
using namespace temper::io;
namespace fs = std::filesystem;

namespace {

std::string tmp_path(const std::string& name) { return test::scratch_path("gguf_model", name); }
using test::expect_error;

Transformer golden_model(const std::string& name) {
  std::string dir = test::test_data("golden/" + name);
  Transformer m(read_hf_config(dir + "/config.json"));
  load_hf_weights(m, SafetensorsFile::open(dir + "/golden.safetensors"), ExtraTensors::ignore);
  return m;
}

std::vector<float> logits_of(Transformer& m, const std::vector<int32_t>& ids) {
  std::vector<float> out(ids.size() * static_cast<size_t>(m.config().vocab_size));
  m.forward_logits(ids.data(), 1, static_cast<int64_t>(ids.size()), out.data());
  return out;
}

std::vector<float> params_of(const Transformer& m, const std::string& name) {
  Tensor t = m.param(name);
  return std::vector<float>(t.data<float>(), t.data<float>() + t.numel());
}

void expect_same_config(const ModelConfig& a, const ModelConfig& b) {
  EXPECT_EQ(a.summary(), b.summary());
  EXPECT_EQ(a.max_position_embeddings, b.max_position_embeddings);
  EXPECT_EQ(static_cast<float>(a.rope_theta), static_cast<float>(b.rope_theta));
  EXPECT_EQ(static_cast<float>(a.rms_norm_eps), static_cast<float>(b.rms_norm_eps));
}

// Minimal llama GGUF for config tests: metadata plus token_embd (the config reads its rows).
struct MiniGguf {
  std::vector<std::pair<std::string, GgufValue>> kv = {
      {"general.architecture", GgufValue::string("llama")},
      {"llama.block_count", GgufValue::u32(2)},
      {"llama.context_length", GgufValue::u32(128)},
      {"llama.embedding_length", GgufValue::u32(64)},
      {"llama.feed_forward_length", GgufValue::u32(96)},
      {"llama.attention.head_count", GgufValue::u32(4)},
      {"llama.attention.head_count_kv", GgufValue::u32(2)},
      {"llama.rope.freq_base", GgufValue::f32(10000.0f)},
      {"llama.attention.layer_norm_rms_epsilon", GgufValue::f32(1e-5f)},
  };
  std::vector<float> emb = std::vector<float>(64 * 32, 0.0f);
  void set(const std::string& k, GgufValue v) {
    for (auto& [key, val] : kv)
      if (key == k) {
        val = std::move(v);
        return;
      }
    kv.emplace_back(k, std::move(v));
  }
  void erase(const std::string& k) {
    std::erase_if(kv, [&](const auto& p) { return p.first == k; });
  }
  std::string write(const std::string& name, int64_t vocab = 32) const {
    GgufWriter w;
    for (const auto& [k, v] : kv) w.add_kv(k, v);
    w.add_tensor("token_embd.weight", Shape({vocab, 64}), GgmlType::f32, emb.data());
    std::string p = tmp_path(name);
    w.write(p);
    return p;
  }
};

using test::smollm2_path;

}  // namespace

TEST(GgufModel, NameMapBothWays) {
  const std::pair<const char*, const char*> pairs[] = {
      {"model.embed_tokens.weight", "token_embd.weight"},
      {"model.norm.weight", "output_norm.weight"},
      {"lm_head.weight", "output.weight"},
      {"model.layers.0.input_layernorm.weight", "blk.0.attn_norm.weight"},
      {"model.layers.12.self_attn.q_proj.weight", "blk.12.attn_q.weight"},
      {"model.layers.3.self_attn.k_proj.bias", "blk.3.attn_k.bias"},
      {"model.layers.3.self_attn.v_proj.weight", "blk.3.attn_v.weight"},
      {"model.layers.3.self_attn.o_proj.weight", "blk.3.attn_output.weight"},
      {"model.layers.3.self_attn.q_norm.weight", "blk.3.attn_q_norm.weight"},
      {"model.layers.3.self_attn.k_norm.weight", "blk.3.attn_k_norm.weight"},
      {"model.layers.29.post_attention_layernorm.weight", "blk.29.ffn_norm.weight"},
      {"model.layers.1.mlp.gate_proj.weight", "blk.1.ffn_gate.weight"},
      {"model.layers.1.mlp.up_proj.weight", "blk.1.ffn_up.weight"},
      {"model.layers.1.mlp.down_proj.weight", "blk.1.ffn_down.weight"},
  };
  for (auto [hf, g] : pairs) {
    EXPECT_EQ(gguf_name_from_hf(hf), g);
    EXPECT_EQ(hf_name_from_gguf(g), hf);
  }
  // Gemma's four norms and Phi-3's fused projections (gguf-py 0.17's MODEL_TENSORS for gemma2/gemma3/phi3).
  const std::tuple<Arch, const char*, const char*> family[] = {
      {Arch::gemma2, "model.layers.2.post_attention_layernorm.weight", "blk.2.post_attention_norm.weight"},
      {Arch::gemma2, "model.layers.2.pre_feedforward_layernorm.weight", "blk.2.ffn_norm.weight"},
      {Arch::gemma3, "model.layers.2.post_feedforward_layernorm.weight", "blk.2.post_ffw_norm.weight"},
      {Arch::gemma3, "model.layers.2.self_attn.q_norm.weight", "blk.2.attn_q_norm.weight"},
      {Arch::phi3, "model.layers.4.self_attn.qkv_proj.weight", "blk.4.attn_qkv.weight"},
      {Arch::phi3, "model.layers.4.mlp.gate_up_proj.weight", "blk.4.ffn_up.weight"},
      {Arch::phi3, "model.layers.4.post_attention_layernorm.weight", "blk.4.ffn_norm.weight"},
  };
  for (auto [arch, hf, g] : family) {
    EXPECT_EQ(gguf_name_from_hf(hf, arch), g) << arch_name(arch);
    EXPECT_EQ(hf_name_from_gguf(g, arch), hf) << arch_name(arch);
  }
  EXPECT_EQ(gguf_name_from_hf("model.layers.0.pre_feedforward_layernorm.weight", Arch::llama), "");
  for (const char* bad :
       {"rope_freqs.weight", "blk.x.attn_q.weight", "blk..attn_q.weight", "blk.0.ffn_gate_exps.weight", "blk.0", ""})
    EXPECT_EQ(hf_name_from_gguf(bad), "") << bad;
  EXPECT_EQ(gguf_name_from_hf("model.layers.0.mlp.experts.0.up_proj.weight"), "");
}

TEST(GgufModel, QkPermutationIsLlamaCppsAndInverts) {
  // convert_hf_to_gguf.py: w.reshape(n_head, 2, D/2, ...).swapaxes(1, 2).reshape(w.shape):
  // for D = 4 the HF rows [0 1 2 3] of a head become [0 2 1 3]; for D = 6, [0 3 1 4 2 5].
  std::vector<float> w = {0, 1, 2, 3, 10, 11, 12, 13};  // 2 heads, D = 4, cols = 1
  gguf_permute_qk_rows(w.data(), 2, 4, 1);
  EXPECT_EQ(w, (std::vector<float>{0, 2, 1, 3, 10, 12, 11, 13}));
  std::vector<float> v = {0, 1, 2, 3, 4, 5};
  gguf_permute_qk_rows(v.data(), 1, 6, 1);
  EXPECT_EQ(v, (std::vector<float>{0, 3, 1, 4, 2, 5}));
  gguf_unpermute_qk_rows(v.data(), 1, 6, 1);
  EXPECT_EQ(v, (std::vector<float>{0, 1, 2, 3, 4, 5}));
  // Whole rows move (cols = 3).
  std::vector<float> m(2 * 4 * 3);
  for (size_t i = 0; i < m.size(); ++i) m[i] = static_cast<float>(i);
  std::vector<float> orig = m;
  gguf_permute_qk_rows(m.data(), 2, 4, 3);
  EXPECT_EQ(std::vector<float>(m.begin() + 3, m.begin() + 6), std::vector<float>(orig.begin() + 6, orig.begin() + 9));
  gguf_unpermute_qk_rows(m.data(), 2, 4, 3);
  EXPECT_EQ(m, orig);
  EXPECT_TRUE(gguf_arch_permutes_qk(Arch::llama));
  EXPECT_FALSE(gguf_arch_permutes_qk(Arch::qwen2));
  EXPECT_FALSE(gguf_arch_permutes_qk(Arch::qwen3));
}

TEST(GgufModel, ExportReloadF32IsExactForEveryArch) {
  std::vector<int32_t> ids = {1, 5, 9, 33, 2, 100, 7, 64, 127, 0};
  for (const char* name : {"llama", "qwen2", "qwen3"}) {
    Transformer m = golden_model(name);
    std::string path = tmp_path(std::string("f32_") + name + ".gguf");
    GgufExportOptions o;
    o.matrix_type = GgmlType::f32;
    o.metadata = {{"general.name", GgufValue::string(name)},
                  {"tokenizer.ggml.model", GgufValue::string("gpt2")},
                  {"tokenizer.ggml.bos_token_id", GgufValue::u32(1)}};
    save_gguf_model(m, path, o);
    EXPECT_FALSE(fs::exists(path + ".tmp"));
    GgufFile f = GgufFile::open(path);
    EXPECT_EQ(f.get_str("general.architecture"), name);
    EXPECT_EQ(f.get_str("general.name"), name);
    EXPECT_EQ(f.get_u32("tokenizer.ggml.bos_token_id"), 1u);
    EXPECT_EQ(f.get_u32("general.file_type"), 0u);
    ModelConfig c = gguf_model_config(f);
    expect_same_config(c, m.config());
    EXPECT_EQ(f.has_tensor("output.weight"), !m.config().tie_word_embeddings) << name;
    for (const GgufTensorInfo& t : f.tensors()) EXPECT_EQ(t.type, GgmlType::f32) << t.name;
    Transformer r(c);
    load_gguf_weights(r, f);
    for (const ParamEntry& e : m.layout().entries()) EXPECT_EQ(params_of(r, e.name), params_of(m, e.name)) << e.name;
    EXPECT_EQ(logits_of(r, ids), logits_of(m, ids)) << name;
    // The llama file stores q/k in llama.cpp's permuted row order; qwen files keep HF order.
    Tensor q = f.view("blk.0.attn_q.weight");
    std::vector<float> hf = params_of(m, "model.layers.0.self_attn.q_proj.weight");
    const int64_t C = m.config().hidden_size, D = m.config().head_dim;
    const int64_t gguf_row1 = std::string(name) == "llama" ? D / 2 : 1;  // GGUF row 1 = HF row D/2 (llama)
    EXPECT_EQ(0, std::memcmp(q.data<float>() + C, hf.data() + gguf_row1 * C, C * sizeof(float))) << name;
  }
}

// The families beyond Llama/Qwen: llama.cpp's names and keys (Gemma's four norms stored as 1 + w, soft-caps and
// windows; Phi-3's attn_qkv/ffn_up and rope_factors_long/short; Llama-3.1's rope_freqs; Mistral as llama with a
// window key), and the reload gives back the config and the model (Gemma's norms to f32 rounding of 1 + w - 1).
TEST(GgufModel, ExportReloadNewFamilies) {
  std::vector<int32_t> ids = {1, 5, 9, 33, 2, 100, 7, 64, 127, 0, 47, 47};
  struct Case {
    const char* golden;
    const char* arch;
    std::vector<const char*> tensors, keys;
  };
  const Case cases[] = {
      {"llama31", "llama", {"rope_freqs.weight", "blk.1.ffn_norm.weight"}, {}},
      {"mistral", "llama", {"blk.0.attn_q.weight", "output.weight"}, {"llama.attention.sliding_window"}},
      {"gemma2",
       "gemma2",
       {"blk.0.post_attention_norm.weight", "blk.0.ffn_norm.weight", "blk.0.post_ffw_norm.weight"},
       {"gemma2.attn_logit_softcapping", "gemma2.final_logit_softcapping", "gemma2.attention.sliding_window"}},
      {"gemma3",
       "gemma3",
       {"blk.1.attn_q_norm.weight", "blk.1.post_ffw_norm.weight"},
       {"gemma3.attention.sliding_window", "gemma3.rope.freq_base_swa", "gemma3.rope.scaling.type"}},
      {"phi3",
       "phi3",
       {"blk.0.attn_qkv.weight", "blk.0.ffn_up.weight", "rope_factors_long.weight", "rope_factors_short.weight"},
       {"phi3.rope.scaling.original_context_length", "phi3.rope.scaling.attn_factor", "phi3.attention.sliding_window"}},
  };
  for (const Case& k : cases) {
    Transformer m = golden_model(k.golden);
    const std::string path = tmp_path(std::string("new_") + k.golden + ".gguf");
    GgufExportOptions o;
    o.matrix_type = GgmlType::f32;
    save_gguf_model(m, path, o);
    GgufFile f = GgufFile::open(path);
    EXPECT_EQ(f.get_str("general.architecture"), k.arch) << k.golden;
    for (const char* t : k.tensors) EXPECT_TRUE(f.has_tensor(t)) << k.golden << " " << t;
    for (const char* key : k.keys) EXPECT_TRUE(f.has_key(key)) << k.golden << " " << key;
    ModelConfig c = gguf_model_config(f);
    expect_same_config(c, m.config());
    ModelConfig want_cfg = m.config();
    want_cfg.pad_token_id = -1;  // config.json's padding_idx has no GGUF key (llama.cpp trains nothing)
    EXPECT_EQ(c.features(), want_cfg.features()) << k.golden;
    c.pad_token_id = m.config().pad_token_id;
    Transformer r(c);
    load_gguf_weights(r, f);
    for (const ParamEntry& e : m.layout().entries()) {
      std::vector<float> a = params_of(r, e.name), b = params_of(m, e.name);
      if (gguf_arch_shifts_norms(c.arch) && gguf_is_norm(e.name)) {
        for (size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(a[i], b[i], 1.2e-7) << e.name;  // (1 + w) - 1 in f32
        const float stored = f.view(gguf_name_from_hf(e.name, c.arch)).data<float>()[0];
        EXPECT_EQ(stored, 1.0f + b[0]) << e.name;
      } else {
        EXPECT_EQ(a, b) << k.golden << " " << e.name;
      }
    }
    std::vector<float> want = logits_of(m, ids), got = logits_of(r, ids);
    for (size_t i = 0; i < want.size(); ++i) ASSERT_NEAR(got[i], want[i], 1e-4 * (1 + std::fabs(want[i]))) << k.golden;
  }
  // Phi-3's fused qkv keeps HF's row order (no permutation); Llama-3.1's rope_freqs are the llama3 divisors.
  Transformer phi = golden_model("phi3");
  GgufFile pf = GgufFile::open(tmp_path("new_phi3.gguf"));
  EXPECT_EQ(0, std::memcmp(pf.view("blk.0.attn_qkv.weight").data<float>(),
                           params_of(phi, "model.layers.0.self_attn.qkv_proj.weight").data(),
                           static_cast<size_t>(phi.config().qkv_dim() * phi.config().hidden_size) * sizeof(float)));
  GgufFile lf = GgufFile::open(tmp_path("new_llama31.gguf"));
  const float* ff = lf.view("rope_freqs.weight").data<float>();
  EXPECT_FLOAT_EQ(ff[0], 1.0f);  // wavelength 6.3 < 2048: kept
  EXPECT_FLOAT_EQ(ff[7], 8.0f);  // wavelength > 8192: divided by the factor
  EXPECT_GT(ff[4], 1.0f);        // 4443: smoothed
  EXPECT_LT(ff[4], 8.0f);
}

TEST(GgufModel, ExportReloadF16AndQ8WithinTheirError) {
  std::vector<int32_t> ids = {1, 5, 9, 33, 2, 100, 7, 64, 127, 0};
  for (const char* name : {"llama", "qwen3"}) {
    Transformer m = golden_model(name);
    std::vector<float> want = logits_of(m, ids);
    for (GgmlType type : {GgmlType::f16, GgmlType::bf16, GgmlType::q8_0}) {
      std::string path = tmp_path(std::string(name) + "_" + std::string(ggml_type_name(type)) + ".gguf");
      GgufExportOptions o;
      o.matrix_type = type;
      save_gguf_model(m, path, o);
      GgufFile f = GgufFile::open(path);
      EXPECT_EQ(f.tensor("blk.0.attn_norm.weight").type, GgmlType::f32);
      EXPECT_EQ(f.tensor("blk.0.attn_q.weight").type, type);
      // intermediate_size 88 is not a multiple of 32: down_proj rows fall back to F16 under Q8_0.
      EXPECT_EQ(f.tensor("blk.0.ffn_down.weight").type, type == GgmlType::q8_0 ? GgmlType::f16 : type);
      EXPECT_EQ(f.tensor("token_embd.weight").type, type);
      Transformer r(gguf_model_config(f));
      load_gguf_weights(r, f);
      // Per element: F16 half an ulp (2^-11 relative), BF16 2^-8, Q8_0 half a step of amax/127
      // plus d's fp16 rounding (bounded here by 1/127 of the largest |w| of the tensor).
      for (const ParamEntry& e : m.layout().entries()) {
        std::vector<float> a = params_of(r, e.name), b = params_of(m, e.name);
        float amax = 0;
        for (float x : b) amax = std::max(amax, std::fabs(x));
        const GgmlType t = gguf_export_type(e.shape, type);
        for (size_t i = 0; i < a.size(); ++i) {
          const float err = std::fabs(a[i] - b[i]);
          const float bound = t == GgmlType::f32    ? 0.0f
                              : t == GgmlType::f16  ? std::ldexp(std::fabs(b[i]), -11) + 1e-7f
                              : t == GgmlType::bf16 ? std::ldexp(std::fabs(b[i]), -8)
                                                    : amax / 127.0f;
          ASSERT_LE(err, bound) << name << " " << ggml_type_name(type) << " " << e.name << "[" << i << "]";
        }
      }
      // Coarse sanity check on logits (the element bounds above are the precise check): measured
      // max |diff| / rms(logits) is ~3.5e-3 for F16, ~5e-2 for BF16, ~8e-2 for Q8_0 on these random
      // tiny models; a wrong row order or tensor would give O(1).
      std::vector<float> got = logits_of(r, ids);
      double max_diff = 0, ss = 0;
      for (size_t i = 0; i < got.size(); ++i) {
        max_diff = std::max(max_diff, static_cast<double>(std::fabs(got[i] - want[i])));
        ss += static_cast<double>(want[i]) * want[i];
      }
      const double rms = std::sqrt(ss / static_cast<double>(want.size()));
      std::printf("%s %s export: max |logit diff| / rms(logits) = %.2e\n", name,
                  std::string(ggml_type_name(type)).c_str(), max_diff / rms);
      EXPECT_LT(max_diff / rms, type == GgmlType::f16 ? 1e-2 : 0.2) << name << " " << ggml_type_name(type);
    }
  }
}

TEST(GgufModel, ConfigFromMetadataAndItsErrors) {
  MiniGguf g;
  ModelConfig c = gguf_model_config(GgufFile::open(g.write("mini.gguf")));
  EXPECT_EQ(c.arch, Arch::llama);
  EXPECT_EQ(c.num_layers, 2);
  EXPECT_EQ(c.hidden_size, 64);
  EXPECT_EQ(c.num_heads, 4);
  EXPECT_EQ(c.num_kv_heads, 2);
  EXPECT_EQ(c.head_dim, 16);
  EXPECT_EQ(c.intermediate_size, 96);
  EXPECT_EQ(c.vocab_size, 32);
  EXPECT_EQ(c.max_position_embeddings, 128);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_FALSE(c.qkv_bias);
  {
    MiniGguf q = g;  // qwen3 with an explicit head_dim; head_count_kv absent -> head_count
    q.kv.clear();
    for (auto& [k, v] : g.kv) q.kv.emplace_back(k == "general.architecture" ? k : "qwen3" + k.substr(5), v);
    q.set("general.architecture", GgufValue::string("qwen3"));
    q.set("qwen3.attention.key_length", GgufValue::u32(24));
    q.erase("qwen3.attention.head_count_kv");
    q.erase("qwen3.rope.freq_base");
    ModelConfig c3 = gguf_model_config(GgufFile::open(q.write("mini_qwen3.gguf")));
    EXPECT_EQ(c3.arch, Arch::qwen3);
    EXPECT_EQ(c3.head_dim, 24);
    EXPECT_EQ(c3.num_kv_heads, 4);
    EXPECT_EQ(c3.rope_theta, 10000.0);
    EXPECT_TRUE(c3.qk_norm);
  }
  auto with = [&](const std::string& file, const std::function<void(MiniGguf&)>& edit, int64_t vocab = 32) {
    MiniGguf m = g;
    edit(m);
    return m.write(file, vocab);
  };
  expect_error(
      [&] {
        gguf_model_config(GgufFile::open(
            with("a1.gguf", [](MiniGguf& m) { m.set("general.architecture", GgufValue::string("gpt2")); })));
      },
      {"a1.gguf", "general.architecture", "'gpt2'", "llama, qwen2, qwen3"});
  expect_error(
      [&] { gguf_model_config(GgufFile::open(with("a2.gguf", [](MiniGguf& m) { m.erase("llama.block_count"); }))); },
      {"a2.gguf", "missing metadata key 'llama.block_count'"});
  expect_error(
      [&] {
        gguf_model_config(GgufFile::open(
            with("a3.gguf", [](MiniGguf& m) { m.set("llama.embedding_length", GgufValue::string("64")); })));
      },
      {"a3.gguf", "'llama.embedding_length'", "has type string", "u32"});
  expect_error(
      [&] {
        gguf_model_config(GgufFile::open(with("a4.gguf", [](MiniGguf& m) {
          m.set("llama.attention.head_count", GgufValue::i32_array({4, 4}));
        })));
      },
      {"a4.gguf", "'llama.attention.head_count'", "array of 2 i32"});
  expect_error(
      [&] {
        gguf_model_config(GgufFile::open(
            with("a5.gguf", [](MiniGguf& m) { m.set("llama.rope.scaling.type", GgufValue::string("yarn")); })));
      },
      {"a5.gguf", "rope.scaling.type is 'yarn'", "supported: linear"});
  expect_error(
      [&] {
        gguf_model_config(GgufFile::open(
            with("a6.gguf", [](MiniGguf& m) { m.set("llama.rope.dimension_count", GgufValue::u32(8)); })));
      },
      {"a6.gguf", "rope.dimension_count is 8", "head_dim 16"});
  expect_error(
      [&] {
        gguf_model_config(
            GgufFile::open(with("a7.gguf", [](MiniGguf& m) { m.set("llama.vocab_size", GgufValue::u32(50)); })));
      },
      {"a7.gguf", "vocab_size is 50", "32 rows"});
  expect_error(
      [&] {
        gguf_model_config(GgufFile::open(
            with("a8.gguf", [](MiniGguf& m) { m.set("llama.attention.head_count_kv", GgufValue::u32(3)); })));
      },
      {"a8.gguf", "num_attention_heads (4)", "num_key_value_heads (3)"});
  expect_error(
      [&] {
        gguf_model_config(
            GgufFile::open(with("a9.gguf", [](MiniGguf& m) { m.set("llama.block_count", GgufValue::u32(0)); })));
      },
      {"a9.gguf", "'llama.block_count' must be > 0"});
  // Absurd sizes are refused by the same bounds as config.json's, named by their metadata keys.
  expect_error(
      [&] {
        gguf_model_config(GgufFile::open(
            with("a11.gguf", [](MiniGguf& m) { m.set("llama.block_count", GgufValue::u32(1000000000)); })));
      },
      {"a11.gguf", "llama.block_count = 1000000000: expected 1 to 1024"});
  expect_error(
      [&] {
        gguf_model_config(GgufFile::open(
            with("a12.gguf", [](MiniGguf& m) { m.set("llama.context_length", GgufValue::u32(4000000000u)); })));
      },
      {"a12.gguf", "llama.context_length = 4000000000: expected 1 to 4194304"});
  expect_error(
      [&] {
        gguf_model_config(GgufFile::open(
            with("a13.gguf", [](MiniGguf& m) { m.set("llama.feed_forward_length", GgufValue::u32(1u << 30)); })));
      },
      {"a13.gguf", "llama.feed_forward_length = 1073741824: expected 1 to 1048576"});
  expect_error(
      [&] {
        gguf_model_config(
            GgufFile::open(with("a10.gguf", [](MiniGguf& m) { m.erase("llama.attention.layer_norm_rms_epsilon"); })));
      },
      {"a10.gguf", "missing metadata key 'llama.attention.layer_norm_rms_epsilon'"});
}

TEST(GgufModel, LoaderErrorsNameTheTensor) {
  Transformer m = golden_model("qwen2");
  GgufExportOptions o;
  o.matrix_type = GgmlType::f32;
  std::string path = tmp_path("qwen2_f32.gguf");
  save_gguf_model(m, path, o);
  GgufFile f = GgufFile::open(path);
  ModelConfig wrong = gguf_model_config(f);
  wrong.intermediate_size = 96;
  Transformer w1(wrong);
  expect_error([&] { load_gguf_weights(w1, f); }, {"qwen2_f32.gguf", "'blk.0.ffn_gate.weight'",
                                                   "'model.layers.0.mlp.gate_proj.weight'", "[88, 64]", "[96, 64]"});
  ModelConfig fewer = gguf_model_config(f);
  fewer.num_layers = 1;
  Transformer w2(fewer);
  expect_error([&] { load_gguf_weights(w2, f); }, {"qwen2_f32.gguf", "'blk.1.", "is not a parameter"});
  ModelConfig tied = gguf_model_config(f);
  tied.tie_word_embeddings = true;
  Transformer w3(tied);
  expect_error([&] { load_gguf_weights(w3, f); }, {"'output.weight'", "'lm_head.weight'", "is not a parameter"});
  ModelConfig norms = gguf_model_config(f);
  norms.qk_norm = true;
  Transformer w4(norms);
  expect_error([&] { load_gguf_weights(w4, f); }, {"missing tensor 'blk.0.attn_q_norm.weight'"});
  // A tensor with no HF counterpart (llama3 rope scaling factors) and an undecodable type.
  {
    GgufWriter w;
    std::vector<float> z(64 * 128, 0.0f);
    w.add_kv("general.architecture", GgufValue::string("llama"));
    w.add_tensor("blk.0.ffn_gate_inp.weight", Shape({8}), GgmlType::f32, z.data());
    std::string p = tmp_path("extra.gguf");
    w.write(p);
    Transformer t(model_config_preset("tiny"));
    expect_error([&] { load_gguf_weights(t, GgufFile::open(p)); },
                 {"extra.gguf", "'blk.0.ffn_gate_inp.weight'", "no Hugging Face counterpart"});
  }
  expect_error(
      [&] {
        GgufExportOptions bad;
        bad.metadata = {{"qwen2.context_length", GgufValue::u32(5)}};
        save_gguf_model(m, tmp_path("reserved.gguf"), bad);
      },
      {"reserved.gguf", "'qwen2.context_length'", "written by the exporter"});
  expect_error(
      [&] {
        GgufExportOptions bad;
        bad.matrix_type = GgmlType::q4_0;
        save_gguf_model(m, tmp_path("q40.gguf"), bad);
      },
      {"Q4_0", "not supported"});
}

// ---------------------------------------------------------------------------------------------
// SmolLM2-135M-Instruct, Q4_1 GGUF (210 Q4_1, 61 F32, token_embd Q8_0, tied).

TEST(GgufSmolLM2, ConfigTokenizerMetadataAndRawBlocks) {
  SKIP_WITHOUT_SMOLLM2();
  GgufFile f = GgufFile::open(smollm2_path());
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.tensors().size(), 272u);
  int q41 = 0, f32 = 0, q80 = 0;
  for (const GgufTensorInfo& t : f.tensors()) {
    q41 += t.type == GgmlType::q4_1;
    f32 += t.type == GgmlType::f32;
    q80 += t.type == GgmlType::q8_0;
  }
  EXPECT_EQ(q41, 210);
  EXPECT_EQ(f32, 61);
  EXPECT_EQ(q80, 1);
  ModelConfig c = gguf_model_config(f);
  EXPECT_EQ(c.arch, Arch::llama);
  EXPECT_EQ(c.num_layers, 30);
  EXPECT_EQ(c.hidden_size, 576);
  EXPECT_EQ(c.num_heads, 9);
  EXPECT_EQ(c.num_kv_heads, 3);
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_EQ(c.intermediate_size, 1536);
  EXPECT_EQ(c.vocab_size, 49152);
  EXPECT_EQ(c.max_position_embeddings, 8192);
  EXPECT_EQ(c.rope_theta, 1e5);
  EXPECT_FLOAT_EQ(static_cast<float>(c.rms_norm_eps), 1e-5f);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_EQ(c.summary(), model_config_preset("smollm2-135m").summary());
  // Tokenizer metadata through the typed getters.
  EXPECT_EQ(f.get_str("tokenizer.ggml.model"), "gpt2");
  EXPECT_EQ(f.get_str("tokenizer.ggml.pre"), "smollm");
  std::vector<std::string> tokens = f.get_str_array("tokenizer.ggml.tokens");
  ASSERT_EQ(tokens.size(), 49152u);
  EXPECT_EQ(tokens[0], "<|endoftext|>");
  EXPECT_EQ(tokens[1], "<|im_start|>");
  EXPECT_EQ(tokens[2], "<|im_end|>");
  std::vector<int32_t> types = f.get_i32_array("tokenizer.ggml.token_type");
  ASSERT_EQ(types.size(), 49152u);
  EXPECT_EQ(types[0], 3);   // control
  EXPECT_EQ(types[17], 1);  // normal
  std::vector<std::string> merges = f.get_str_array("tokenizer.ggml.merges");
  ASSERT_EQ(merges.size(), 48900u);
  EXPECT_EQ(merges[0], "\xc4\xa0 t");
  EXPECT_EQ(f.get_u32("tokenizer.ggml.bos_token_id"), 1u);
  EXPECT_EQ(f.get_u32("tokenizer.ggml.eos_token_id"), 2u);
  EXPECT_EQ(f.get_str("tokenizer.chat_template").rfind("{% for message in messages %}", 0), 0u);
  EXPECT_FALSE(f.get_bool("tokenizer.ggml.add_bos_token"));
  EXPECT_EQ(f.metadata_with_prefix("tokenizer.").size(), 12u);  // 11 tokenizer.ggml.* + chat_template
  // Raw blocks for quantized inference.
  QuantView e = f.quant_view("token_embd.weight");
  EXPECT_EQ(e.type, GgmlType::q8_0);
  EXPECT_EQ(e.rows, 49152);
  EXPECT_EQ(e.cols, 576);
  EXPECT_EQ(e.row_bytes, 18u * 34u);
  QuantView q = f.quant_view("blk.0.attn_q.weight");
  EXPECT_EQ(q.type, GgmlType::q4_1);
  EXPECT_EQ(q.row_bytes, 18u * 20u);
}

TEST(GgufSmolLM2, LogitsMatchTransformers) {
  SKIP_WITHOUT_SMOLLM2();
  auto golden = SafetensorsFile::open(test::test_data("gguf/smollm2_logits.safetensors"));
  auto meta = nlohmann::json::parse(golden.metadata().at("golden"));
  const uint64_t want_bytes = meta["model_bytes"].get<uint64_t>();
  ASSERT_EQ(fs::file_size(smollm2_path()), want_bytes)
      << smollm2_path() << " is not the file the golden was made from (" << meta["model_sha256"] << ")";

  auto t0 = std::chrono::steady_clock::now();
  GgufFile f = GgufFile::open(smollm2_path());
  Transformer m(gguf_model_config(f));
  load_gguf_weights(m, f);
  double load_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  Tensor ids_t = golden.get("input_ids");
  std::vector<int32_t> ids(ids_t.data<int32_t>(), ids_t.data<int32_t>() + ids_t.numel());
  const int64_t T = static_cast<int64_t>(ids.size()), V = m.config().vocab_size;
  ASSERT_EQ(T, 24);
  m.plan(T, T);
  std::vector<float> logits = logits_of(m, ids);

  const int32_t* top1 = golden.get("top1").data<int32_t>();
  const float* margin = golden.get("top1_margin").data<float>();
  for (int64_t t = 0; t < T; ++t) {
    const float* row = logits.data() + t * V;
    int64_t best = std::max_element(row, row + V) - row;
    EXPECT_EQ(best, top1[t]) << "position " << t << " (HF top-1 margin " << margin[t] << ")";
  }
  // Tolerance: transformers and temper decode the same Q4_1/Q8_0 blocks to identical f32 weights
  // (checked bit-exactly against gguf-py above), so the only differences are f32 summation order
  // (GEMM blocking, attention, RMSNorm) over 30 layers. The golden script measured HF f32 vs HF
  // f64 at 5.6e-5 max |diff| on logits up to |29.4|; we allow 2e-3 absolute (~7e-5 of the logit
  // range), 40x that noise, and still 25x below the smallest top-1 margin (0.049).
  Tensor rows = golden.get("logits_rows");
  Tensor pos = golden.get("row_positions");
  double max_diff = 0, max_abs = 0;
  for (int64_t r = 0; r < pos.numel(); ++r) {
    const int64_t t = pos.data<int32_t>()[r];
    for (int64_t v = 0; v < V; ++v) {
      double want = rows.data<float>()[r * V + v], got = logits[t * V + v];
      max_diff = std::max(max_diff, std::fabs(got - want));
      max_abs = std::max(max_abs, std::fabs(want));
    }
  }
  const float* lmax = golden.get("logits_max").data<float>();
  double max_diff_top = 0;
  for (int64_t t = 0; t < T; ++t)
    max_diff_top = std::max(max_diff_top, std::fabs(static_cast<double>(logits[t * V + top1[t]]) - lmax[t]));
  std::printf(
      "SmolLM2 Q4_1 vs transformers f32: max |logit diff| %.3e over %lld full rows (max |logit| %.2f); "
      "top-1 logit max |diff| %.3e over %lld positions; load %.2f s\n",
      max_diff, static_cast<long long>(pos.numel()), max_abs, max_diff_top, static_cast<long long>(T), load_s);
  EXPECT_LT(max_diff, 2e-3);
  EXPECT_LT(max_diff_top, 2e-3);
}
