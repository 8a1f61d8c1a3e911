// Model files in: safetensors header validation (each malformed case names the file and tensor),
// HF config.json parsing and its errors, loading weights by HF name with shape checks.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "common/scratch.h"
#include "common/test_data.h"
#include "temper/core/error.h"
#include "temper/io/file_map.h"
#include "temper/io/hf_config.h"
#include "temper/io/hf_weights.h"
#include "temper/io/safetensors.h"
#include "temper/io/safetensors_writer.h"
#include "temper/model/param_layout.h"
#include "temper/model/transformer.h"

using namespace temper;
namespace fs = std::filesystem;

namespace {

std::string tmp_path(const std::string& name) { return test::scratch_path("io", name); }

std::string write_st(const std::string& name, const std::string& header, size_t data_bytes, int64_t hlen_override = -1) {
  std::string p = tmp_path(name);
  std::ofstream f(p, std::ios::binary);
  uint64_t n = hlen_override >= 0 ? static_cast<uint64_t>(hlen_override) : header.size();
  f.write(reinterpret_cast<const char*>(&n), 8);
  f << header;
  std::string data(data_bytes, '\0');
  f << data;
  return p;
}

using test::expect_error;

}  // namespace

TEST(Safetensors, ReadsTensorsAndMetadata) {
  std::string h = R"({"__metadata__":{"format":"pt"},"a":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]},"b":{"dtype":"BF16","shape":[3],"data_offsets":[16,22]}})";
  std::string p = write_st("ok.safetensors", h, 22);
  auto f = io::SafetensorsFile::open(p);
  EXPECT_EQ(f.names().size(), 2u);
  EXPECT_EQ(f.get("a").shape(), Shape({2, 2}));
  EXPECT_EQ(f.get("b").dtype(), DType::bf16);
  EXPECT_EQ(f.metadata().at("format"), "pt");
  expect_error([&] { f.get("c"); }, {"ok.safetensors", "'c'"});
}

TEST(Safetensors, MalformedFilesGiveClearErrors) {
  expect_error([] { io::SafetensorsFile::open(tmp_path("missing.safetensors")); }, {"missing.safetensors", "cannot open"});
  {
    std::string p = tmp_path("short.safetensors");
    std::ofstream(p) << "abc";
    expect_error([&] { io::SafetensorsFile::open(p); }, {"short.safetensors", "too short"});
  }
  expect_error([] { io::SafetensorsFile::open(write_st("hlen.safetensors", "{}", 0, 1000)); },
               {"hlen.safetensors", "header length 1000"});
  expect_error([] { io::SafetensorsFile::open(write_st("json.safetensors", "{not json", 0)); },
               {"json.safetensors", "not valid JSON"});
  expect_error([] {
    io::SafetensorsFile::open(write_st("dtype.safetensors", R"({"w":{"dtype":"F8","shape":[1],"data_offsets":[0,1]}})", 1));
  }, {"dtype.safetensors", "'w'", "F8"});
  expect_error([] {
    io::SafetensorsFile::open(write_st("range.safetensors", R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", 8));
  }, {"range.safetensors", "'w'", "outside the data region"});
  expect_error([] {
    io::SafetensorsFile::open(write_st("shape.safetensors", R"({"w":{"dtype":"F32","shape":[3],"data_offsets":[0,16]}})", 16));
  }, {"shape.safetensors", "'w'", "needs 12 bytes"});
  expect_error([] {
    io::SafetensorsFile::open(write_st("overlap.safetensors",
        R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})", 12));
  }, {"overlap.safetensors", "'a'", "'b'", "overlap"});
  expect_error([] {
    io::SafetensorsFile::open(write_st("shapetype.safetensors", R"({"w":{"dtype":"F32","shape":4,"data_offsets":[0,16]}})", 16));
  }, {"shapetype.safetensors", "'w'", "must be a list"});
  expect_error([] {
    io::SafetensorsFile::open(write_st("overflow.safetensors",
                                       R"({"w":{"dtype":"F32","shape":[4611686018427387904,8],"data_offsets":[0,0]}})", 0));
  }, {"overflow.safetensors", "'w'", "overflows"});
  expect_error([] {
    io::SafetensorsFile::open(write_st("fields.safetensors", R"({"w":{"dtype":"F32","shape":[3]}})", 16));
  }, {"fields.safetensors", "'w'", "data_offsets"});
}

// What the reference reader (Python safetensors 0.5.3, safe_open) refuses: bytes after the last tensor (even on a
// file of metadata only), bytes no tensor holds; and what it takes: an unpadded or space-padded header, an empty
// tensor at the end, our writer's files.
TEST(Safetensors, DataRegionMatchesTheHeaderExactly) {
  const std::string a = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  expect_error([&] { io::SafetensorsFile::open(write_st("trailing.safetensors", a, 9)); },
               {"trailing.safetensors", "the header describes 8 bytes of tensor data, the file holds 9"});
  expect_error([&] { io::SafetensorsFile::open(write_st("trailing8.safetensors", a + "      ", 16)); },
               {"trailing8.safetensors", "describes 8 bytes", "holds 16", "8 bytes after the last tensor"});
  expect_error([] { io::SafetensorsFile::open(write_st("meta_trailing.safetensors", R"({"__metadata__":{}})", 4)); },
               {"meta_trailing.safetensors", "describes 0 bytes", "holds 4"});
  expect_error([] {
    io::SafetensorsFile::open(write_st("gap.safetensors",
        R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[16,20]}})", 20));
  }, {"gap.safetensors", "bytes [8, 16) of the data region belong to no tensor", "'b'"});
  expect_error([] {
    io::SafetensorsFile::open(write_st("gap0.safetensors", R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})", 16));
  }, {"gap0.safetensors", "bytes [0, 8)", "'a'"});
  EXPECT_EQ(io::SafetensorsFile::open(write_st("exact.safetensors", a, 8)).get("a").numel(), 2);
  EXPECT_EQ(io::SafetensorsFile::open(write_st("exact_padded.safetensors", a + "      ", 8)).get("a").numel(), 2);
  EXPECT_EQ(io::SafetensorsFile::open(write_st("meta_only.safetensors", R"({"__metadata__":{}})", 0)).names().size(), 0u);
  auto empty_last = io::SafetensorsFile::open(write_st("empty_last.safetensors",
      R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"z":{"dtype":"F32","shape":[0],"data_offsets":[8,8]}})", 8));
  EXPECT_EQ(empty_last.get("z").numel(), 0);
  Tensor w = Tensor::zeros(Shape({3}), DType::f32), v = Tensor::zeros(Shape({5}), DType::bf16);
  const std::string ours = tmp_path("ours.safetensors");
  io::write_safetensors(ours, {{"w", w}, {"v", v}});
  EXPECT_EQ(io::SafetensorsFile::open(ours).names().size(), 2u);
}

TEST(HfConfig, ReadsTheGoldenConfigs) {
  ModelConfig l = io::read_hf_config(test::test_data("golden/llama/config.json"));
  EXPECT_EQ(l.arch, Arch::llama);
  EXPECT_TRUE(l.tie_word_embeddings);
  EXPECT_EQ(l.head_dim, 16);
  ModelConfig q2 = io::read_hf_config(test::test_data("golden/qwen2/config.json"));
  EXPECT_TRUE(q2.qkv_bias);
  EXPECT_FALSE(q2.tie_word_embeddings);
  ModelConfig q3 = io::read_hf_config(test::test_data("golden/qwen3/config.json"));
  EXPECT_TRUE(q3.qk_norm);
  EXPECT_EQ(q3.head_dim, 24);
  EXPECT_EQ(q3.rope_theta, 1e6);
}

// Every family's features from config.json, and hf_config_json writes a config that reads back to the same model.
TEST(HfConfig, NewFamiliesReadAndWriteBack) {
  ModelConfig g2 = io::read_hf_config(test::test_data("golden/gemma2/config.json"));
  EXPECT_EQ(g2.arch, Arch::gemma2);
  EXPECT_TRUE(g2.tie_word_embeddings);  // absent from the file: Gemma2Config's default
  EXPECT_EQ(g2.act, Activation::gelu_tanh);
  EXPECT_TRUE(g2.norm_offset && g2.embed_scale && g2.sandwich_norm);
  EXPECT_EQ(g2.attn_softcap, 2.0);
  EXPECT_EQ(g2.final_softcap, 5.0);
  EXPECT_EQ(g2.query_pre_attn_scalar, 24);
  EXPECT_TRUE(g2.slides(0));
  EXPECT_FALSE(g2.slides(1));
  EXPECT_EQ(g2.pad_token_id, 47);
  ModelConfig g3 = io::read_hf_config(test::test_data("golden/gemma3/config.json"));
  EXPECT_TRUE(g3.qk_norm);
  EXPECT_EQ(g3.attn_softcap, 0.0);  // null
  EXPECT_EQ(g3.rope_local_theta, 10000.0);
  EXPECT_EQ(g3.rope_scaling.type, kernels::RopeScaling::Type::linear);
  ModelConfig p3 = io::read_hf_config(test::test_data("golden/phi3/config.json"));
  EXPECT_TRUE(p3.fused_proj);
  EXPECT_EQ(p3.rope_scaling.type, kernels::RopeScaling::Type::longrope);
  EXPECT_EQ(p3.rope_scaling.original_max_position, 32);
  EXPECT_EQ(p3.rope_scaling.factor, 2.0);
  EXPECT_EQ(p3.sliding_window, 7);
  EXPECT_TRUE(p3.slides(0) && p3.slides(1));
  ModelConfig l31 = io::read_hf_config(test::test_data("golden/llama31/config.json"));
  EXPECT_EQ(l31.rope_scaling.type, kernels::RopeScaling::Type::llama3);
  EXPECT_EQ(l31.rope_scaling.original_max_position, 8192);
  for (const char* name : {"llama", "qwen2", "qwen3", "llama31", "mistral", "gemma2", "gemma3", "phi3"}) {
    ModelConfig c = io::read_hf_config(test::test_data(std::string("golden/") + name + "/config.json"));
    const std::string p = tmp_path(std::string("back_") + name + ".json");
    std::ofstream(p) << io::hf_config_json(c).dump(2);
    ModelConfig back = io::read_hf_config(p);
    EXPECT_EQ(back.summary(), c.summary()) << name;
    EXPECT_EQ(back.features(), c.features()) << name;
    EXPECT_EQ(back.rope_scaling.short_factor, c.rope_scaling.short_factor) << name;
    EXPECT_EQ(back.max_position_embeddings, c.max_position_embeddings) << name;
  }
}

TEST(HfConfig, BadConfigsNameFileAndField) {
  auto base = nlohmann::json::parse(std::ifstream(test::test_data("golden/llama/config.json")));
  auto write = [](const std::string& name, const nlohmann::json& j) {
    std::string p = tmp_path(name);
    std::ofstream(p) << j.dump();
    return p;
  };
  auto j1 = base;
  j1.erase("hidden_size");
  expect_error([&] { io::read_hf_config(write("c1.json", j1)); }, {"c1.json", "hidden_size", "missing"});
  auto j2 = base;
  j2["num_attention_heads"] = "four";
  expect_error([&] { io::read_hf_config(write("c2.json", j2)); }, {"c2.json", "num_attention_heads", "integer"});
  auto j3 = base;
  j3["architectures"] = {"GPT2LMHeadModel"};
  j3["model_type"] = "gpt2";
  expect_error([&] { io::read_hf_config(write("c3.json", j3)); }, {"c3.json", "architectures", "GPT2LMHeadModel"});
  auto j6 = base;
  j6["mlp_bias"] = true;
  expect_error([&] { io::read_hf_config(write("c6.json", j6)); }, {"c6.json", "mlp_bias"});
  auto j7 = nlohmann::json::parse(std::ifstream(test::test_data("golden/qwen2/config.json")));
  j7["use_sliding_window"] = true;
  expect_error([&] { io::read_hf_config(write("c7.json", j7)); }, {"c7.json", "use_sliding_window"});
  // Variants outside what the model implements are refused with the field named.
  auto j9 = base;
  j9["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}};
  expect_error([&] { io::read_hf_config(write("c9.json", j9)); }, {"c9.json", "rope_scaling", "'yarn'", "llama3"});
  auto phi = nlohmann::json::parse(std::ifstream(test::test_data("golden/phi3/config.json")));
  auto j10 = phi;
  j10["partial_rotary_factor"] = 0.75;
  expect_error([&] { io::read_hf_config(write("c10.json", j10)); }, {"c10.json", "partial_rotary_factor", "0.75"});
  auto j11 = phi;
  j11["rope_scaling"]["short_factor"] = {1.0, 2.0};
  expect_error([&] { io::read_hf_config(write("c11.json", j11)); }, {"c11.json", "short_factor", "head_dim / 2 = 8"});
  auto gemma = nlohmann::json::parse(std::ifstream(test::test_data("golden/gemma2/config.json")));
  auto j12 = gemma;
  j12["hidden_activation"] = "gelu";
  expect_error([&] { io::read_hf_config(write("c12.json", j12)); }, {"c12.json", "hidden_activation", "'gelu'"});
  auto j13 = gemma;
  j13["architectures"] = {"Gemma3ForConditionalGeneration"};
  j13["model_type"] = "gemma3";
  expect_error([&] { io::read_hf_config(write("c13.json", j13)); }, {"c13.json", "image-text", "gemma3_text"});
  auto j14 = gemma;
  j14["attention_bias"] = true;
  expect_error([&] { io::read_hf_config(write("c14.json", j14)); }, {"c14.json", "attention_bias"});
  auto j8 = base;
  j8["hidden_act"] = 3;
  expect_error([&] { io::read_hf_config(write("c8.json", j8)); }, {"c8.json", "hidden_act", "string"});
  auto j4 = base;
  j4["num_key_value_heads"] = 3;
  expect_error([&] { io::read_hf_config(write("c4.json", j4)); }, {"c4.json", "num_key_value_heads"});
  {
    std::string p = tmp_path("c5.json");
    std::ofstream(p) << "{\"a\": ";
    expect_error([&] { io::read_hf_config(p); }, {"c5.json", "JSON"});
  }
}

// An absurd size (a typo, a hostile file) is refused naming the file, the field and the bound, before anything is
// sized from it: once, num_hidden_layers = 10^9 grew memory for a minute and ended in std::bad_alloc.
TEST(HfConfig, AbsurdSizesAreRefusedBeforeAnythingIsAllocated) {
  const auto base = nlohmann::json::parse(std::ifstream(test::test_data("golden/llama/config.json")));
  struct Case {
    const char* field;
    int64_t value;
    const char* bound;
  };
  for (const Case& k :
       {Case{"num_hidden_layers", 1000000000, "expected 1 to 1024"},
        Case{"hidden_size", 1 << 20, "expected 1 to 65536"},
        Case{"intermediate_size", int64_t{1} << 40, "expected 1 to 1048576"},
        Case{"vocab_size", int64_t{1} << 23, "expected 1 to 4194304"},
        Case{"max_position_embeddings", int64_t{1} << 30, "expected 1 to 4194304"},
        Case{"num_attention_heads", 4096, "expected 1 to 1024"}, Case{"head_dim", 1 << 16, "expected 1 to 1024"}}) {
    auto j = base;
    j[k.field] = k.value;
    if (std::string(k.field) == "num_attention_heads") j["num_key_value_heads"] = 4096;
    const std::string p = tmp_path(std::string("absurd_") + k.field + ".json");
    std::ofstream(p) << j.dump();
    expect_error([&] { io::read_hf_config(p); },
                 {p, std::string(k.field) + " = " + std::to_string(k.value) + ": " + k.bound});
  }
  // Within every bound but too many parameters together (96 layers of 65536 x 262144 MLPs: 5e12).
  auto j = base;
  j["num_hidden_layers"] = 96, j["hidden_size"] = 65536, j["intermediate_size"] = 262144;
  j["num_attention_heads"] = 512, j["num_key_value_heads"] = 64, j["head_dim"] = 128;
  const std::string p = tmp_path("absurd_params.json");
  std::ofstream(p) << j.dump();
  expect_error([&] { io::read_hf_config(p); }, {p, "parameters: expected at most 2e+12"});
  // The model itself validates before sizing anything from its config.
  ModelConfig c = io::read_hf_config(test::test_data("golden/llama/config.json"));
  c.num_layers = 1000000000;
  expect_error([&] { Transformer m(c); }, {"num_hidden_layers = 1000000000: expected 1 to 1024"});
  c.num_layers = kMaxLayers;  // the bound itself is accepted
  EXPECT_NO_THROW(c.validate());
}

// The bound on parameters counts what the model holds: ModelConfig::param_count equals the layout's tensors.
TEST(HfConfig, ParamCountEqualsTheLayoutsTensors) {
  auto count = [](const ModelConfig& c) {
    const ParamLayout layout(c);
    int64_t n = 0;
    for (const ParamEntry& e : layout.entries()) n += e.numel();
    return static_cast<double>(n);
  };
  for (std::string_view name : kModelPresets) {
    ModelConfig c = model_config_preset(std::string(name));
    EXPECT_EQ(c.param_count(), count(c)) << name;
  }
  for (const char* name : {"llama", "qwen2", "qwen3", "gemma2", "gemma3", "phi3"}) {
    ModelConfig c = io::read_hf_config(test::test_data(std::string("golden/") + name + "/config.json"));
    EXPECT_EQ(c.param_count(), count(c)) << name;
  }
}

TEST(HfWeights, MissingOrMisshapedTensorIsNamed) {
  ModelConfig c = io::read_hf_config(test::test_data("golden/qwen2/config.json"));
  Transformer m(c);
  auto good = io::SafetensorsFile::open(test::test_data("golden/qwen2/golden.safetensors"));
  expect_error([&] { io::load_hf_weights(m, good); }, {"golden.safetensors", "is not a parameter"});
  io::load_hf_weights(m, good, io::ExtraTensors::ignore);
  EXPECT_EQ(m.param("model.norm.weight").data<float>()[0], good.get("model.norm.weight").data<float>()[0]);
  ModelConfig wrong = c;
  wrong.intermediate_size = 96;
  Transformer m2(wrong);
  expect_error([&] { io::load_hf_weights(m2, good, io::ExtraTensors::ignore); }, {"golden.safetensors", "gate_proj.weight", "[88, 64]", "[96, 64]"});
  ModelConfig tied = c;
  tied.qkv_bias = false;
  tied.qk_norm = true;  // asks for q_norm, which a Qwen2 file lacks
  Transformer m3(tied);
  expect_error([&] { io::load_hf_weights(m3, good, io::ExtraTensors::ignore); }, {"golden.safetensors", "missing tensor", "q_norm"});
}

TEST(FileLoad, CopyModeReadsTheSameBytesAsMmap) {
  std::string p = test::test_data("golden/qwen2/golden.safetensors");
  auto a = io::SafetensorsFile::open(p);
  io::file_load_mode_set(io::LoadMode::copy);
  auto b = io::SafetensorsFile::open(p);
  io::file_load_mode_set(io::LoadMode::mmap);
  ASSERT_EQ(a.names(), b.names());
  for (const auto& n : a.names()) {
    Tensor x = a.get(n), y = b.get(n);
    ASSERT_EQ(x.nbytes(), y.nbytes());
    EXPECT_NE(x.raw(), y.raw());
    EXPECT_EQ(0, std::memcmp(x.raw(), y.raw(), x.nbytes())) << n;
  }
}
