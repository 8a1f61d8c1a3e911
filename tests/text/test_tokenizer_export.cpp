// Tokenizer export: to_spec (GGUF metadata) and to_hf_json / to_hf_config_json (Hugging Face
// files) read back by from_spec / from_hf_json give the Hugging Face golden ids for every corpus
// string, for the four golden tokenizers and a tokenizer built from SmolLM2's TokenizerSpec; the
// written JSON has tokenizers' own structure; what GGUF cannot express is refused. With
// TEMPER_TOKENIZER_EXPORT_DIR set, the files are also written there for
// tools/ref/check_tokenizer_export.py (the real tokenizers / transformers loading them).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "common/scratch.h"
#include "temper/core/error.h"
#include "temper/text/pre_tokenizer.h"
#include "temper/text/tokenizer.h"
#include "text_test_util.h"

using namespace temper;
using namespace temper::text;
using nlohmann::json;
using temper::test::check_goldens;
using temper::test::corpus;
using temper::test::expect_error;
using temper::test::golden_tokenizer;
using temper::test::load_json;
using temper::test::show;
using temper::test::smollm2_spec;

namespace {

const std::vector<std::string> kGoldens = {"smollm2", "gpt2", "llama3", "qwen2"};

// b behaves as a: every corpus string (plain, with special tokens added, special tokens not parsed)
// gets the same ids and decodes the same; same vocabulary, special flags, bos/eos/unk/pad.
void expect_same_tokenizer(const Tokenizer& a, const Tokenizer& b, const std::string& what) {
  ASSERT_EQ(a.vocab_size(), b.vocab_size()) << what;
  for (const std::string& text : corpus().texts) {
    const std::vector<int32_t> ids = a.encode(text);
    EXPECT_EQ(b.encode(text), ids) << what << ": '" << show(text) << "'";
    EXPECT_EQ(b.encode(text, true), a.encode(text, true)) << what << " add_special: '" << show(text) << "'";
    EXPECT_EQ(b.encode(text, false, false), a.encode(text, false, false))
        << what << " parse_special=false: '" << show(text) << "'";
    EXPECT_EQ(b.decode(ids), a.decode(ids)) << what;
    EXPECT_EQ(b.decode(ids, true), a.decode(ids, true)) << what;
  }
  int differing = 0;
  for (int32_t id = 0; id < a.vocab_size(); ++id) {
    differing += a.is_special(id) != b.is_special(id) || a.token_bytes(id) != b.token_bytes(id);
  }
  EXPECT_EQ(differing, 0) << what << ": ids whose special flag or bytes differ";
  EXPECT_EQ(b.bos_id(), a.bos_id()) << what;
  EXPECT_EQ(b.eos_id(), a.eos_id()) << what;
  EXPECT_EQ(b.unk_id(), a.unk_id()) << what;
  EXPECT_EQ(b.pad_id(), a.pad_id()) << what;
  EXPECT_EQ(b.prefix_ids(), a.prefix_ids()) << what;
  EXPECT_EQ(b.suffix_ids(), a.suffix_ids()) << what;
  EXPECT_EQ(b.chat_template(), a.chat_template()) << what;
}

Tokenizer reload_hf(const Tokenizer& tok) {
  return Tokenizer::from_hf_json(tok.to_hf_json(), tok.to_hf_config_json(), "exported/tokenizer.json",
                                 "exported/tokenizer_config.json");
}

void expect_same_spec(const TokenizerSpec& a, const TokenizerSpec& b) {
  EXPECT_EQ(a.model, b.model);
  EXPECT_EQ(a.tokens, b.tokens);
  EXPECT_EQ(a.merges, b.merges);
  EXPECT_EQ(a.token_types, b.token_types);
  EXPECT_EQ(a.token_attrs, b.token_attrs);
  EXPECT_EQ(a.pre, b.pre);
  EXPECT_EQ(a.bos_id, b.bos_id);
  EXPECT_EQ(a.eos_id, b.eos_id);
  EXPECT_EQ(a.unk_id, b.unk_id);
  EXPECT_EQ(a.pad_id, b.pad_id);
  EXPECT_EQ(a.add_bos, b.add_bos);
  EXPECT_EQ(a.add_eos, b.add_eos);
  EXPECT_EQ(a.chat_template, b.chat_template);
}

// tokenizer.json merges in the [a, b] form (the smollm2 golden has "a b" strings).
json merge_pairs(const json& merges) {
  json out = json::array();
  for (const json& m : merges) {
    if (m.is_array()) {
      out.push_back(m);
    } else {
      const std::string s = m.get<std::string>();
      const size_t sp = s.find(' ');
      out.push_back({s.substr(0, sp), s.substr(sp + 1)});
    }
  }
  return out;
}

class TokenizerExport : public ::testing::TestWithParam<std::string> {};

TEST_P(TokenizerExport, ToSpecThenFromSpecGivesTheGoldens) {
  const std::string name = GetParam();
  const Tokenizer& tok = golden_tokenizer(name);
  const TokenizerSpec spec = tok.to_spec();
  const std::map<std::string, std::string> pre = {
      {"smollm2", "smollm"}, {"gpt2", "gpt2"}, {"llama3", "llama-bpe"}, {"qwen2", "qwen2"}};
  EXPECT_EQ(spec.pre, pre.at(name));
  EXPECT_EQ(spec.model, "gpt2");
  ASSERT_EQ(spec.tokens.size(), static_cast<size_t>(tok.vocab_size()));
  ASSERT_EQ(spec.token_types.size(), spec.tokens.size());
  for (int32_t id = 0; id < tok.vocab_size(); ++id) {
    EXPECT_EQ(spec.tokens[id], tok.id_to_token(id)) << name << " id " << id;
    if (tok.is_special(id)) {
      EXPECT_EQ(spec.token_types[id], static_cast<int32_t>(TokenType::kControl)) << id;
    }
  }
  EXPECT_EQ(spec.bos_id, tok.bos_id());
  EXPECT_EQ(spec.eos_id, tok.eos_id());
  EXPECT_EQ(spec.add_bos, !tok.prefix_ids().empty());

  const Tokenizer back = Tokenizer::from_spec(spec);
  check_goldens(back, name);
  expect_same_tokenizer(tok, back, name + " via TokenizerSpec");
  expect_same_spec(back.to_spec(), spec);  // a fixed point
}

TEST_P(TokenizerExport, ToHfJsonThenFromHfJsonGivesTheGoldens) {
  const std::string name = GetParam();
  const Tokenizer& tok = golden_tokenizer(name);
  const std::string tj = tok.to_hf_json();
  const std::string cfg = tok.to_hf_config_json();
  const Tokenizer back = reload_hf(tok);
  check_goldens(back, name);
  expect_same_tokenizer(tok, back, name + " via tokenizer.json");
  EXPECT_EQ(back.to_hf_json(), tj);  // a fixed point
  EXPECT_EQ(back.to_hf_config_json(), cfg);
}

TEST_P(TokenizerExport, HfJsonEqualsTheOriginalFile) {
  // The goldens were written by tokenizers 0.21: the export has the same added tokens, normalizer,
  // pre-tokenizer, decoder and model (vocab, merges as pairs, options).
  const std::string name = GetParam();
  const json orig = load_json("tokenizer/" + name + "/tokenizer.json");
  const json out = json::parse(golden_tokenizer(name).to_hf_json());
  for (const char* key :
       {"version", "truncation", "padding", "added_tokens", "normalizer", "pre_tokenizer", "decoder"}) {
    EXPECT_EQ(out[key], orig[key]) << name << ": " << key;
  }
  json om = orig["model"], xm = out["model"];
  om["merges"] = merge_pairs(om["merges"]);
  EXPECT_EQ(xm, om) << name << ": model";
  if (name == "llama3") {
    // TemplateProcessing: the same single template and special tokens (the pair template gets
    // type_id 1 for the second sequence, as transformers writes it).
    const json& op = orig["post_processor"]["processors"];
    const json& xp = out["post_processor"]["processors"];
    ASSERT_EQ(xp.size(), 2u);
    EXPECT_EQ(xp[0], op[0]);
    EXPECT_EQ(xp[1]["single"], op[1]["single"]);
    EXPECT_EQ(xp[1]["special_tokens"], op[1]["special_tokens"]);
  } else {
    EXPECT_EQ(out["post_processor"], orig["post_processor"]) << name;
  }
  // Key order as tokenizers writes it.
  const std::string text = golden_tokenizer(name).to_hf_json();
  EXPECT_LT(text.find("\"version\""), text.find("\"added_tokens\""));
  EXPECT_LT(text.find("\"added_tokens\""), text.find("\"pre_tokenizer\""));
  EXPECT_LT(text.find("\"decoder\""), text.find("\"model\""));
}

INSTANTIATE_TEST_SUITE_P(All, TokenizerExport, ::testing::ValuesIn(kGoldens),
                         [](const auto& info) { return info.param; });

TEST(TokenizerExport, SpecBuiltTokenizerToHfJsonGivesTheGoldens) {
  const Tokenizer tok = Tokenizer::from_spec(smollm2_spec());
  const Tokenizer back = reload_hf(tok);
  check_goldens(back, "smollm2");
  expect_same_tokenizer(tok, back, "smollm2 TokenizerSpec via tokenizer.json");

  const json tj = json::parse(tok.to_hf_json());
  EXPECT_EQ(tj["pre_tokenizer"], json::parse(R"({"type": "Sequence", "pretokenizers": [
      {"type": "Digits", "individual_digits": true},
      {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true}]})"));
  EXPECT_EQ(tj["decoder"]["type"], "ByteLevel");
  EXPECT_EQ(tj["post_processor"]["type"], "ByteLevel");  // add_bos_token is false
  EXPECT_EQ(tj["model"]["unk_token"], "<|endoftext|>");
  EXPECT_EQ(tj["model"]["fuse_unk"], true);
  EXPECT_EQ(tj["model"]["vocab"].size(), 49152u);
  ASSERT_EQ(tj["model"]["merges"].size(), 48900u);
  EXPECT_EQ(tj["model"]["merges"][0], json::parse(R"(["Ġ", "t"])"));
  ASSERT_EQ(tj["added_tokens"].size(), 17u);
  EXPECT_EQ(tj["added_tokens"][1], json::parse(R"({"id": 1, "content": "<|im_start|>", "single_word": false,
      "lstrip": false, "rstrip": false, "normalized": false, "special": true})"));

  const json cfg = json::parse(tok.to_hf_config_json());
  EXPECT_EQ(cfg["bos_token"], "<|im_start|>");
  EXPECT_EQ(cfg["eos_token"], "<|im_end|>");
  EXPECT_EQ(cfg["pad_token"], "<|im_end|>");
  EXPECT_EQ(cfg["unk_token"], "<|endoftext|>");
  EXPECT_EQ(cfg["add_bos_token"], false);
  EXPECT_EQ(cfg["add_eos_token"], false);
  EXPECT_EQ(cfg["chat_template"], smollm2_spec().chat_template);
  EXPECT_EQ(cfg["clean_up_tokenization_spaces"], false);
  EXPECT_EQ(cfg["tokenizer_class"], "PreTrainedTokenizerFast");

  // GGUF -> HF -> GGUF gives the spec back (the SmolLM2 spec has no token attributes).
  expect_same_spec(back.to_spec(), smollm2_spec());
}

TEST(TokenizerExport, Llama3HfJsonAddsBosThroughThePostProcessor) {
  const Tokenizer& tok = golden_tokenizer("llama3");
  const json tj = json::parse(tok.to_hf_json());
  const json& steps = tj["pre_tokenizer"]["pretokenizers"];
  ASSERT_EQ(steps.size(), 2u);
  EXPECT_EQ(steps[0]["type"], "Split");
  EXPECT_EQ(steps[0]["pattern"]["Regex"], std::string(kRegexLlama3));
  EXPECT_EQ(steps[0]["behavior"], "Isolated");
  EXPECT_EQ(steps[1]["type"], "ByteLevel");
  EXPECT_EQ(steps[1]["use_regex"], false);
  EXPECT_EQ(tj["model"]["ignore_merges"], true);
  const json& tp = tj["post_processor"]["processors"][1];
  EXPECT_EQ(tp["type"], "TemplateProcessing");
  EXPECT_EQ(tp["single"], json::parse(R"([{"SpecialToken": {"id": "<|begin_of_text|>", "type_id": 0}},
                                          {"Sequence": {"id": "A", "type_id": 0}}])"));
  EXPECT_EQ(tp["special_tokens"]["<|begin_of_text|>"]["ids"], json::array({2000}));
  const json cfg = json::parse(tok.to_hf_config_json());
  EXPECT_EQ(cfg["add_bos_token"], true);
  EXPECT_EQ(cfg["bos_token"], "<|begin_of_text|>");
  EXPECT_EQ(cfg["eos_token"], "<|eot_id|>");
  EXPECT_TRUE(cfg["pad_token"].is_null());
  // Qwen2 has no BOS: null, and nothing added.
  const json qcfg = json::parse(golden_tokenizer("qwen2").to_hf_config_json());
  EXPECT_TRUE(qcfg["bos_token"].is_null());
  EXPECT_EQ(qcfg["add_bos_token"], false);
  EXPECT_EQ(qcfg["pad_token"], "<|endoftext|>");
}

TEST(TokenizerExport, SpecCarriesAddedTokenOptions) {
  // gpt2's <mask> strips the space on its left (lstrip) and "single" matches whole words only; GGUF
  // has no key for either, so to_spec puts them in token_attrs.
  const Tokenizer& tok = golden_tokenizer("gpt2");
  TokenizerSpec spec = tok.to_spec();
  const int32_t mask = tok.token_to_id("<mask>"), single = tok.token_to_id("single");
  ASSERT_EQ(spec.token_attrs.size(), spec.tokens.size());
  EXPECT_EQ(spec.token_attrs[mask], static_cast<int32_t>(TokenAttr::kLstrip));
  EXPECT_EQ(spec.token_attrs[single],
            static_cast<int32_t>(TokenAttr::kSingleWord) | static_cast<int32_t>(TokenAttr::kNormalized));
  EXPECT_EQ(spec.token_types[tok.token_to_id("[user-tok]")], static_cast<int32_t>(TokenType::kUserDefined));
  EXPECT_EQ(spec.token_types[mask], static_cast<int32_t>(TokenType::kControl));
  const std::string text = "a <mask> b singles single";
  EXPECT_EQ(Tokenizer::from_spec(spec).encode(text), tok.encode(text));
  // Without them (as a spec read from GGUF) the ids differ: the space before <mask> is a token.
  spec.token_attrs.clear();
  EXPECT_NE(Tokenizer::from_spec(spec).encode(text), tok.encode(text));
  // The SmolLM2/Llama-3/Qwen2 goldens have no options set: no token_attrs.
  EXPECT_TRUE(golden_tokenizer("llama3").to_spec().token_attrs.empty());
  EXPECT_TRUE(golden_tokenizer("qwen2").to_spec().token_attrs.empty());
}

TEST(TokenizerExport, ToSpecRefusesWhatGgufCannotSay) {
  const json gpt2 = load_json("tokenizer/gpt2/tokenizer.json");
  auto load = [](const json& j, const std::string& cfg = "") {
    return Tokenizer::from_hf_json(j.dump(), cfg, "t.json");
  };
  {
    json j = gpt2;
    j["pre_tokenizer"]["add_prefix_space"] = true;
    const Tokenizer t = load(j);
    expect_error([&] { t.to_spec(); }, {"t.json", "no llama.cpp name", "prefix space", "gpt2 = "});
    EXPECT_NO_THROW(reload_hf(t));  // HF can say it
    EXPECT_EQ(reload_hf(t).encode("hello world"), t.encode("hello world"));
  }
  {
    json j = load_json("tokenizer/qwen2/tokenizer.json");
    j["model"]["ignore_merges"] = true;  // Qwen2's regex with ignore_merges: not llama.cpp's qwen2
    expect_error([&] { load(j).to_spec(); }, {"no llama.cpp name", "with ignore_merges"});
  }
  {
    json j = gpt2;
    j["pre_tokenizer"] = json::parse(R"({"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"String": "a.c"}, "behavior": "Isolated", "invert": false},
        {"type": "ByteLevel", "add_prefix_space": false, "use_regex": true}]})");
    const Tokenizer t = load(j);
    expect_error([&] { t.to_spec(); }, {"no llama.cpp name"});
    const json out = json::parse(t.to_hf_json());
    EXPECT_EQ(out["pre_tokenizer"]["pretokenizers"][0]["pattern"], json::parse(R"({"String": "a.c"})"));
    EXPECT_EQ(reload_hf(t).encode("xa.cx xabcx"), t.encode("xa.cx xabcx"));
    // The String pattern is a literal: "a.c" splits off, "abc" does not.
    const Tokenizer& base = golden_tokenizer("gpt2");
    EXPECT_EQ(t.encode("xabcx"), base.encode("xabcx"));
    std::vector<int32_t> want;
    for (const char* w : {"x", "a", ".", "c", "x"}) {
      for (int32_t id : base.encode(w)) want.push_back(id);
    }
    EXPECT_EQ(t.encode("xa.cx"), want);
  }
  {
    json j = gpt2;
    j["model"]["byte_fallback"] = true;
    expect_error([&] { load(j).to_spec(); }, {"byte_fallback"});
  }
  {
    // Two tokens before the text: add_bos_token cannot say it, in GGUF nor in tokenizer_config.json.
    json j = gpt2;
    j["post_processor"] = json::parse(R"({"type": "TemplateProcessing",
        "single": [{"SpecialToken": {"id": "<|endoftext|>", "type_id": 0}},
                   {"SpecialToken": {"id": "<mask>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
        "pair": [], "special_tokens": {"<|endoftext|>": {"id": "<|endoftext|>", "ids": [0], "tokens": ["<|endoftext|>"]},
                                       "<mask>": {"id": "<mask>", "ids": [1500], "tokens": ["<mask>"]}}})");
    const Tokenizer t = load(j, R"({"bos_token": "<|endoftext|>"})");
    EXPECT_EQ(t.prefix_ids(), (std::vector<int32_t>{0, 1500}));
    expect_error([&] { t.to_spec(); }, {"[0, 1500]", "add_bos_token"});
    const json cfg = json::parse(t.to_hf_config_json());
    EXPECT_FALSE(cfg.contains("add_bos_token"));  // it would override the post-processor
    EXPECT_EQ(reload_hf(t).prefix_ids(), t.prefix_ids());
  }
}

TEST(TokenizerExport, SpecTokenAttrsAndUtf8Errors) {
  TokenizerSpec s = smollm2_spec();
  s.token_attrs.assign(3, 0);
  expect_error([&] { Tokenizer::from_spec(s); }, {"token_attrs", "3", "49152"});
  // A GGUF token that is not UTF-8 cannot go into tokenizer.json.
  s = smollm2_spec();
  s.tokens[5] = "<bad\xFF>";
  const Tokenizer t = Tokenizer::from_spec(s);
  expect_error([&] { (void)t.to_hf_json(); }, {"TokenizerSpec", "added token 5", "not valid UTF-8"});
  EXPECT_NO_THROW(t.to_spec());
}

TEST(TokenizerExport, GapsInTheIdsBecomeUnusedPadTokens) {
  // Ids 256..259 have no token (tokenizer.json may skip ids); GGUF needs one string per id.
  const Tokenizer& ref = golden_tokenizer("gpt2");
  json vocab = json::object();
  for (int b = 0; b < 256; ++b) vocab[ref.id_to_token(ref.encode(std::string(1, static_cast<char>(b))).at(0))] = b;
  const json tj = {
      {"added_tokens", {{{"id", 260}, {"content", "<|end|>"}, {"special", true}}}},
      {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", json::array()}}},
      {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}}},
      {"decoder", {{"type", "ByteLevel"}}},
  };
  const Tokenizer t = Tokenizer::from_hf_json(tj.dump());
  const TokenizerSpec s = t.to_spec();
  ASSERT_EQ(s.tokens.size(), 261u);
  EXPECT_EQ(s.tokens[257], "[PAD257]");
  EXPECT_EQ(s.token_types[257], static_cast<int32_t>(TokenType::kUnused));
  EXPECT_EQ(s.token_types[260], static_cast<int32_t>(TokenType::kControl));
  const Tokenizer back = Tokenizer::from_spec(s);
  EXPECT_EQ(back.encode("hi<|end|>[PAD257]"), t.encode("hi<|end|>[PAD257]"));
  EXPECT_EQ(reload_hf(t).encode("hi<|end|>"), t.encode("hi<|end|>"));
}

// Not a check: writes the exported files for tools/ref/check_tokenizer_export.py.
TEST(TokenizerExport, WriteFilesForTheReferenceCheck) {
  const char* dir = std::getenv("TEMPER_TOKENIZER_EXPORT_DIR");
  if (dir == nullptr || *dir == 0) GTEST_SKIP() << "TEMPER_TOKENIZER_EXPORT_DIR is not set";
  auto write = [&](const std::string& name, const Tokenizer& tok) {
    const std::filesystem::path d = std::filesystem::path(dir) / name;
    std::filesystem::create_directories(d);
    std::ofstream(d / "tokenizer.json", std::ios::binary) << tok.to_hf_json();
    std::ofstream(d / "tokenizer_config.json", std::ios::binary) << tok.to_hf_config_json();
  };
  for (const std::string& name : kGoldens) {
    write(name, golden_tokenizer(name));
    write(name + "_via_spec", Tokenizer::from_spec(golden_tokenizer(name).to_spec()));  // HF -> GGUF -> HF
  }
  write("smollm2_from_spec", Tokenizer::from_spec(smollm2_spec()));
}

}  // namespace

TEST(TokenizerNfc, NormalizerComposesDecomposedInput) {
  // A real Qwen2 tokenizer.json carries an NFC normalizer: "e" + U+0301 must tokenize as "é".
  json j = load_json("tokenizer/qwen2/tokenizer.json");
  const std::string plain = j.dump();
  j["normalizer"] = {{"type", "NFC"}};
  auto with = Tokenizer::from_hf_json(j.dump());
  auto without = Tokenizer::from_hf_json(plain);
  const std::string composed = "caf\xC3\xA9 na\xC3\xAFve", decomposed = "cafe\xCC\x81 nai\xCC\x88ve";
  EXPECT_EQ(with.encode(decomposed), without.encode(composed));
  EXPECT_NE(without.encode(decomposed), without.encode(composed));
  EXPECT_EQ(with.encode("<|im_start|>"), without.encode("<|im_start|>"));  // added tokens untouched
}
