// SentencePiece-style BPE: the trained fixtures of tests/data/tokenizer (llama2, mistral, gemma
// pipelines) against tokenizers' goldens; llama.cpp's vocabulary GGUFs (Llama-2, Phi-3, from the
// bootstrap's .cache/llamacpp) read as model "llama" against transformers' conversion goldens and
// llama.cpp's own .inp/.out tokenizations; export round trips (tokenizer.json, TokenizerSpec).
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>

#include "temper/core/error.h"
#include "temper/io/gguf_file.h"
#include "text_test_util.h"

namespace temper::test {
namespace {

const char* const kSpmFixtures[] = {"llama2", "mistral", "gemma"};

class TokenizerGoldenSpm : public ::testing::TestWithParam<const char*> {};

TEST_P(TokenizerGoldenSpm, IdsAndDecodeEqualHuggingFace) {
  const Tokenizer& tok = golden_tokenizer(GetParam());
  const int round_trips = check_goldens(tok, GetParam());
  // decode(encode(x)) == x as often as with tokenizers (byte fallback keeps every character): llama2
  // loses only "" -> Strip; Metaspace's decoder drops every "▁" of the first token (30 strings).
  const std::map<std::string, int> expected = {{"llama2", 70}, {"mistral", 41}, {"gemma", 71}};
  EXPECT_EQ(round_trips, expected.at(GetParam())) << GetParam();
}

TEST_P(TokenizerGoldenSpm, HfJsonExportRoundTrips) {
  const Tokenizer& tok = golden_tokenizer(GetParam());
  const Tokenizer back = Tokenizer::from_hf_json(tok.to_hf_json(), tok.to_hf_config_json(), "exported.json");
  check_goldens(back, GetParam());
}

INSTANTIATE_TEST_SUITE_P(All, TokenizerGoldenSpm, ::testing::ValuesIn(kSpmFixtures),
                         [](const auto& info) { return std::string(info.param); });

TEST(TokenizerSpm, PipelinesAreReadAsWritten) {
  EXPECT_EQ(golden_tokenizer("llama2").describe(), "(none)");
  EXPECT_EQ(golden_tokenizer("mistral").describe(), "Metaspace(\xE2\x96\x81, prepend first, no split)");
  EXPECT_EQ(golden_tokenizer("gemma").describe(), "Split(/ /, merged with previous)");
}

// The fixture with the golden's other pre-tokenizer/decoder options (make_tokenizer_goldens.py SPM_VARIANTS).
void check_variant(const std::string& name, const char* key, const nlohmann::json& pre, const nlohmann::json& dec) {
  nlohmann::json j = load_json("tokenizer/" + name + "/tokenizer.json");
  j["pre_tokenizer"] = pre;
  if (!dec.is_null()) j["decoder"] = dec;
  const Tokenizer tok = Tokenizer::from_hf_json(j.dump(), "", name + " variant");
  const auto g = load_json("tokenizer/" + name + "/golden.json");
  ASSERT_TRUE(g.contains(key)) << name;
  for (const auto& w : g[key]) {
    const std::string text = w["text"].get<std::string>();
    EXPECT_EQ(tok.encode(text), ids_of(w["ids"])) << name << " " << key << " '" << show(text) << "'";
    EXPECT_EQ(tok.decode(ids_of(w["ids"])), w["decoded"].get<std::string>()) << name << " " << key;
  }
  // And written back: the same options.
  const Tokenizer back = Tokenizer::from_hf_json(tok.to_hf_json(), "", "exported");
  EXPECT_EQ(back.describe(), tok.describe());
  for (const auto& w : g[key]) EXPECT_EQ(back.encode(w["text"].get<std::string>()), ids_of(w["ids"]));
}

TEST(TokenizerSpm, MetaspaceAlwaysWithSplit) {
  const nlohmann::json ms = {
      {"type", "Metaspace"}, {"replacement", "\xE2\x96\x81"}, {"prepend_scheme", "always"}, {"split", true}};
  check_variant("mistral", "metaspace_always_split", ms, ms);
}

TEST(TokenizerSpm, SplitsMergedWithNextAndPrevious) {
  const nlohmann::json pre = {
      {"type", "Sequence"},
      {"pretokenizers",
       {{{"type", "Split"}, {"pattern", {{"Regex", "[0-9]"}}}, {"behavior", "MergedWithNext"}, {"invert", false}},
        {{"type", "Split"},
         {"pattern", {{"String", "\xE2\x96\x81"}}},
         {"behavior", "MergedWithPrevious"},
         {"invert", false}}}}};
  check_variant("gemma", "merged_splits", pre, nullptr);
}

TEST(TokenizerSpm, ByteFallbackAndPrefix) {
  const Tokenizer& tok = golden_tokenizer("llama2");
  // A character outside the vocabulary: its UTF-8 bytes as <0xAB> tokens (ids 3 + byte).
  const std::vector<int32_t> ids = tok.encode("\xE4\xB8\x96");  // U+4E16
  ASSERT_GE(ids.size(), 3u);
  EXPECT_EQ(std::vector<int32_t>(ids.end() - 3, ids.end()), (std::vector<int32_t>{3 + 0xE4, 3 + 0xB8, 3 + 0x96}));
  EXPECT_EQ(tok.decode(ids), "\xE4\xB8\x96");
  // An invalid byte run decodes to one U+FFFD per byte token (tokenizers' ByteFallback), not per subpart.
  EXPECT_EQ(tok.decode(std::vector<int32_t>{3 + 0xE4, 3 + 0xB8}), "\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(tok.token_bytes(3 + 0x41), "A");
  // Prepend("▁") goes before each piece between added tokens; Strip removes one leading space.
  EXPECT_EQ(tok.decode(tok.encode("a<|endoftext|>b")), "a<|endoftext|> b");
}

TEST(TokenizerSpm, LongWordIsFast) {
  // No pre-tokenizer: the whole text is one BPE word. 200k characters must not take quadratic time.
  const Tokenizer& tok = golden_tokenizer("llama2");
  std::string text;
  while (text.size() < 200000) text += corpus().texts.back();
  const auto t0 = std::chrono::steady_clock::now();
  const std::vector<int32_t> ids = tok.encode(text);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(tok.decode(ids), text);
  RecordProperty("encode_seconds", std::to_string(s));
}

// --- llama.cpp's vocabulary GGUFs (scripts/bootstrap) ---------------------------------------------

std::string vocab_path(const std::string& file) {
  return test_data("../../.cache/llamacpp/vocab/" + file);
}

#define SKIP_WITHOUT_VOCAB(file)                  \
  if (!std::filesystem::exists(vocab_path(file))) \
  GTEST_SKIP() << vocab_path(file) << " is absent (scripts/bootstrap extracts llama.cpp's vocabulary GGUFs)"

// The TokenizerSpec as app/model_source.cpp's gguf_tokenizer reads it (llama.cpp's defaults included).
TokenizerSpec spec_from_gguf(const std::string& file) {
  const io::GgufFile f = io::GgufFile::open(vocab_path(file));
  TokenizerSpec s;
  s.model = f.get_str("tokenizer.ggml.model");
  s.tokens = f.get_str_array("tokenizer.ggml.tokens");
  if (f.find("tokenizer.ggml.merges")) s.add_merge_strings(f.get_str_array("tokenizer.ggml.merges"));
  if (f.find("tokenizer.ggml.scores")) s.scores = f.get_f32_array("tokenizer.ggml.scores");
  if (f.find("tokenizer.ggml.token_type")) s.token_types = f.get_i32_array("tokenizer.ggml.token_type");
  auto id = [&](const char* key, int32_t dflt) { return f.find(key) ? static_cast<int32_t>(f.get_u32(key)) : dflt; };
  s.bos_id = id("tokenizer.ggml.bos_token_id", 1);
  s.eos_id = id("tokenizer.ggml.eos_token_id", 2);
  s.unk_id = id("tokenizer.ggml.unknown_token_id", 0);
  s.pad_id = id("tokenizer.ggml.padding_token_id", -1);
  s.add_bos = f.find("tokenizer.ggml.add_bos_token") ? f.get_bool("tokenizer.ggml.add_bos_token") : true;
  if (f.find("tokenizer.ggml.add_space_prefix")) s.add_space_prefix = f.get_bool("tokenizer.ggml.add_space_prefix");
  return s;
}

const Tokenizer& gguf_tokenizer(const std::string& file) {
  static std::map<std::string, Tokenizer> cache;
  auto it = cache.find(file);
  if (it == cache.end()) it = cache.emplace(file, Tokenizer::from_spec(spec_from_gguf(file))).first;
  return it->second;
}

// llama.cpp's test-tokenizer-0 files: texts separated by "\n__ggml_vocab_test__\n", one line of ids each.
void check_llamacpp_out(const Tokenizer& tok, const std::string& file) {
  std::ifstream fi(vocab_path(file + ".inp")), fo(vocab_path(file + ".out"));
  std::stringstream si, so;
  si << fi.rdbuf();
  so << fo.rdbuf();
  const std::string inp = si.str(), sep = "\n__ggml_vocab_test__\n";
  std::vector<std::string> texts;
  for (size_t b = 0;;) {
    const size_t e = inp.find(sep, b);
    if (e == std::string::npos) {
      if (b < inp.size()) texts.push_back(inp.substr(b));  // the last text may have no separator after it
      break;
    }
    texts.push_back(inp.substr(b, e - b));
    b = e + sep.size();
  }
  std::vector<std::vector<int32_t>> want;
  for (std::string line; std::getline(so, line);) {
    std::istringstream ls(line);
    want.emplace_back();
    for (int32_t v; ls >> v;) want.back().push_back(v);
  }
  ASSERT_EQ(texts.size(), want.size()) << file;
  ASSERT_GT(texts.size(), 30u);
  for (size_t i = 0; i < texts.size(); ++i) {
    EXPECT_EQ(tok.encode(texts[i]), want[i]) << file << " case " << i << " '" << show(texts[i]) << "'";
  }
}

TEST(TokenizerSpmGguf, LongTextIsFast) {
  // llama.cpp's SPM loop on one 1.2 MB segment (the generated text x100): a priority queue, not a
  // scan per merge (that took minutes). Times are recorded (--gtest_output=json), not asserted.
  SKIP_WITHOUT_VOCAB("ggml-vocab-llama-spm.gguf");
  const Tokenizer& tok = gguf_tokenizer("ggml-vocab-llama-spm.gguf");
  std::string text;
  for (int i = 0; i < 100; ++i) text += corpus().texts.back();
  const auto t0 = std::chrono::steady_clock::now();
  const std::vector<int32_t> ids = tok.encode(text);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(tok.decode(ids), text);
  RecordProperty("encode_mb_per_s", std::to_string(text.size() / s / 1e6));
  RecordProperty("tokens", std::to_string(ids.size()));
}

TEST(TokenizerSpmGguf, Llama2MatchesLlamaCpp) {
  SKIP_WITHOUT_VOCAB("ggml-vocab-llama-spm.gguf");
  check_llamacpp_out(gguf_tokenizer("ggml-vocab-llama-spm.gguf"), "ggml-vocab-llama-spm.gguf");
}

TEST(TokenizerSpmGguf, Phi3MatchesLlamaCpp) {
  SKIP_WITHOUT_VOCAB("ggml-vocab-phi-3.gguf");
  check_llamacpp_out(gguf_tokenizer("ggml-vocab-phi-3.gguf"), "ggml-vocab-phi-3.gguf");
}

TEST(TokenizerSpmGguf, Gemma4MatchesLlamaCpp) {
  // Gemma 4 (model "gemma4": merges, "▁" for spaces, no space prefix, byte fallback): 262144 tokens.
  SKIP_WITHOUT_VOCAB("ggml-vocab-gemma-4.gguf");
  const Tokenizer& tok = gguf_tokenizer("ggml-vocab-gemma-4.gguf");
  check_llamacpp_out(tok, "ggml-vocab-gemma-4.gguf");
  EXPECT_EQ(tok.decode(tok.encode(" Hello  world\n\xF0\x9F\xA6\x99")), " Hello  world\n\xF0\x9F\xA6\x99");
  // Written back: the same GGUF keys, and a tokenizer.json that tokenizes the same.
  const TokenizerSpec in = spec_from_gguf("ggml-vocab-gemma-4.gguf");
  const TokenizerSpec out = tok.to_spec();
  EXPECT_EQ(out.model, "gemma4");
  EXPECT_EQ(out.merges, in.merges);
  EXPECT_EQ(out.scores, in.scores);
  EXPECT_EQ(out.token_types, in.token_types);
  EXPECT_FALSE(out.add_space_prefix);
  const Tokenizer back = Tokenizer::from_hf_json(tok.to_hf_json(), tok.to_hf_config_json(), "exported.json");
  check_llamacpp_out(back, "ggml-vocab-gemma-4.gguf");
}

TEST(TokenizerSpmGguf, Llama2EqualsTransformersConversion) {
  SKIP_WITHOUT_VOCAB("ggml-vocab-llama-spm.gguf");
  const Tokenizer& tok = gguf_tokenizer("ggml-vocab-llama-spm.gguf");
  check_goldens(tok, "llama2_gguf");
  EXPECT_EQ(tok.encode("Hello world", true), (std::vector<int32_t>{1, 15043, 3186}));
}

TEST(TokenizerSpmGguf, Phi3EqualsTransformersConversion) {
  SKIP_WITHOUT_VOCAB("ggml-vocab-phi-3.gguf");
  check_goldens(gguf_tokenizer("ggml-vocab-phi-3.gguf"), "phi3_gguf");
}

TEST(TokenizerSpmGguf, HfJsonExportRunsTheBpePath) {
  // The GGUF tokenizer written as tokenizer.json (merges from the scores as transformers does) and
  // read back runs tokenizers' BPE on the real vocabulary: the same goldens.
  SKIP_WITHOUT_VOCAB("ggml-vocab-llama-spm.gguf");
  const Tokenizer& tok = gguf_tokenizer("ggml-vocab-llama-spm.gguf");
  const Tokenizer back = Tokenizer::from_hf_json(tok.to_hf_json(), tok.to_hf_config_json(), "exported.json");
  check_goldens(back, "llama2_gguf");
  EXPECT_EQ(back.encode("Hello world", true), (std::vector<int32_t>{1, 15043, 3186}));
}

TEST(TokenizerSpmGguf, SpecRoundTripKeepsScoresAndTypes) {
  SKIP_WITHOUT_VOCAB("ggml-vocab-llama-spm.gguf");
  const TokenizerSpec in = spec_from_gguf("ggml-vocab-llama-spm.gguf");
  const TokenizerSpec out = gguf_tokenizer("ggml-vocab-llama-spm.gguf").to_spec();
  EXPECT_EQ(out.model, "llama");
  EXPECT_EQ(out.tokens, in.tokens);
  EXPECT_EQ(out.scores, in.scores);
  EXPECT_EQ(out.token_types, in.token_types);
  EXPECT_TRUE(out.merges.empty());
  EXPECT_EQ(out.add_space_prefix, true);
  EXPECT_EQ(out.bos_id, 1);
  EXPECT_EQ(out.unk_id, 0);
  EXPECT_TRUE(out.add_bos);
}

// --- TokenizerSpec export of the trained fixtures --------------------------------------------------

TEST(TokenizerSpmExport, SpecFromMergesEncodesAsTokenizers) {
  // Scores derived from the merge ranks: llama.cpp's score-ordered merging gives tokenizers' ids.
  for (const char* name : {"llama2", "gemma"}) {
    const TokenizerSpec s = golden_tokenizer(name).to_spec();
    EXPECT_EQ(s.model, "llama") << name;
    EXPECT_EQ(s.add_space_prefix, std::string(name) == "llama2") << name;
    ASSERT_EQ(s.scores.size(), s.tokens.size()) << name;
    EXPECT_EQ(s.token_types.at(3 + (std::string(name) == "gemma" ? 4 : 0)), static_cast<int32_t>(TokenType::kByte));
    check_goldens(Tokenizer::from_spec(s), name);
  }
}

TEST(TokenizerSpmExport, MergesLlamaCppCannotFollowAreRefused) {
  // merges[13] = er + ▁ and merges[14] = e + r▁ both make "er▁".
  nlohmann::json j = load_json("tokenizer/llama2/tokenizer.json");
  auto& merges = j["model"]["merges"];
  ASSERT_EQ(merges[13], nlohmann::json::array({"er", "\xE2\x96\x81"}));
  ASSERT_EQ(merges[14], nlohmann::json::array({"e", "r\xE2\x96\x81"}));
  auto refused = [](const nlohmann::json& tj, std::initializer_list<std::string> parts) {
    try {
      Tokenizer::from_hf_json(tj.dump(), "", "l2/tokenizer.json").to_spec();
      ADD_FAILURE() << "expected an error";
    } catch (const Error& e) {
      for (const std::string& p : parts) EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
    }
  };
  // Without e + r▁, llama.cpp would still merge e and r▁ (their text is a token); BPE would not.
  nlohmann::json missing = j;
  missing["model"]["merges"].erase(14);
  refused(missing,
          {"l2/tokenizer.json: cannot write", "'e' + 'r\xE2\x96\x81' makes the token 'er\xE2\x96\x81'", "not a merge"});
  // e + r▁ ranked after another token's merge: llama.cpp orders by the merged token only.
  nlohmann::json apart = j;
  std::swap(apart["model"]["merges"][14], apart["model"]["merges"][15]);
  refused(apart, {"the merges making 'er\xE2\x96\x81' are not consecutive (ranks 13 and 15)"});
  // A byte-level-free tokenizer without byte_fallback: llama.cpp would write bytes, BPE the unk.
  nlohmann::json no_fallback = j;
  no_fallback["model"]["byte_fallback"] = false;
  refused(no_fallback, {"no byte_fallback"});
}

TEST(TokenizerSpmExport, MetaspaceFirstIsRefusedForGguf) {
  try {
    golden_tokenizer("mistral").to_spec();
    FAIL() << "expected an error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("mistral/tokenizer.json"), std::string::npos) << msg;
    EXPECT_NE(msg.find("Metaspace"), std::string::npos) << msg;
    EXPECT_NE(msg.find("Hugging Face format"), std::string::npos) << msg;
  }
}

TEST(TokenizerSpmExport, WriteFilesForTheReferenceCheck) {
  // tools/ref/check_tokenizer_export.py loads these with tokenizers and transformers (see docs/TOKENIZER.md).
  const char* dir = std::getenv("TEMPER_TOKENIZER_EXPORT_DIR");
  if (dir == nullptr || *dir == 0) GTEST_SKIP() << "TEMPER_TOKENIZER_EXPORT_DIR is not set";
  auto write = [&](const std::string& name, const Tokenizer& tok) {
    const std::filesystem::path d = std::filesystem::path(dir) / name;
    std::filesystem::create_directories(d);
    std::ofstream(d / "tokenizer.json", std::ios::binary) << tok.to_hf_json();
    std::ofstream(d / "tokenizer_config.json", std::ios::binary) << tok.to_hf_config_json();
  };
  for (const char* name : kSpmFixtures) write(name, golden_tokenizer(name));
  for (const char* name : {"llama2", "gemma"}) {
    write(std::string(name) + "_via_spec", Tokenizer::from_spec(golden_tokenizer(name).to_spec()));
  }
  if (std::filesystem::exists(vocab_path("ggml-vocab-llama-spm.gguf"))) {
    write("llama2_gguf", gguf_tokenizer("ggml-vocab-llama-spm.gguf"));
  }
  if (std::filesystem::exists(vocab_path("ggml-vocab-phi-3.gguf"))) {
    write("phi3_gguf", gguf_tokenizer("ggml-vocab-phi-3.gguf"));
  }
}

}  // namespace
}  // namespace temper::test
