// Tokenizer errors: every malformed tokenizer.json / tokenizer_config.json / TokenizerSpec gives a
// temper::Error naming the file and the field (and, for names, what is known).
#include <gtest/gtest.h>

#include <functional>

#include "temper/core/error.h"
#include "temper/text/tokenizer.h"
#include "temper/text/utf8.h"
#include "text_test_util.h"

using namespace temper;
using namespace temper::text;
using nlohmann::json;

namespace {

void expect_error(const std::function<void()>& fn, std::initializer_list<std::string> parts) {
  try {
    fn();
    ADD_FAILURE() << "no error; expected one mentioning '" << *parts.begin() << "'";
  } catch (const Error& e) {
    const std::string msg = e.what();
    for (const std::string& p : parts) EXPECT_NE(msg.find(p), std::string::npos) << "'" << p << "' not in: " << msg;
  }
}

// A small valid byte-level BPE tokenizer.json: the 256 byte symbols, "ab" and one merge.
json tiny() {
  json vocab = json::object();
  for (int b = 0; b < 256; ++b) {
    // The byte-level symbol of b (GPT-2's table): printable Latin-1 stand for themselves.
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
    static int extra = 0;
    if (b == 0) extra = 0;
    std::string sym;
    utf8_append(sym, printable ? static_cast<char32_t>(b) : static_cast<char32_t>(256 + extra++));
    vocab[sym] = b;
  }
  vocab["ab"] = 256;
  return {
      {"version", "1.0"},
      {"added_tokens", {{{"id", 257}, {"content", "<|end|>"}, {"special", true}}}},
      {"normalizer", nullptr},
      {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}},
      {"post_processor", nullptr},
      {"decoder", {{"type", "ByteLevel"}}},
      {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", {"a b"}}}},
  };
}

Tokenizer load(const json& j, const std::string& cfg = "") {
  return Tokenizer::from_hf_json(j.dump(), cfg, "dir/tokenizer.json", "dir/tokenizer_config.json");
}

TEST(TokenizerErrors, TinyIsValid) {
  const Tokenizer t = load(tiny());
  EXPECT_EQ(t.encode("ab<|end|>"), (std::vector<int32_t>{256, 257}));
  EXPECT_EQ(t.vocab_size(), 258);
}

TEST(TokenizerErrors, MissingFile) {
  expect_error([] { Tokenizer::from_hf_files("/nonexistent/tokenizer.json"); },
               {"/nonexistent/tokenizer.json", "cannot open"});
}

TEST(TokenizerErrors, NotJson) {
  expect_error([] { Tokenizer::from_hf_json("{\"model\": [", "", "x/tokenizer.json"); },
               {"x/tokenizer.json", "not valid JSON"});
  expect_error([] { load(tiny(), "{oops"); }, {"dir/tokenizer_config.json", "not valid JSON"});
}

TEST(TokenizerErrors, ModelFields) {
  json j = tiny();
  j["model"]["type"] = "Unigram";
  expect_error([&] { load(j); }, {"dir/tokenizer.json", "model.type", "Unigram", "only BPE"});
  j = tiny();
  j["model"].erase("vocab");
  expect_error([&] { load(j); }, {"dir/tokenizer.json", "model.vocab", "missing"});
  j = tiny();
  j["model"]["vocab"] = json::array();
  expect_error([&] { load(j); }, {"model.vocab", "expected an object"});
  j = tiny();
  j["model"]["vocab"]["x"] = -3;
  expect_error([&] { load(j); }, {"model.vocab[\"x\"]", "non-negative integer"});
  j = tiny();
  j["model"]["vocab"]["far"] = 100000000;
  expect_error([&] { load(j); }, {"model.vocab", "not dense"});
  j = tiny();
  j["model"]["dropout"] = 0.1;
  expect_error([&] { load(j); }, {"model.dropout", "not supported"});
  j = tiny();
  j["model"]["continuing_subword_prefix"] = "##";
  expect_error([&] { load(j); }, {"model.continuing_subword_prefix", "##"});
  j = tiny();
  j["model"]["unk_token"] = "<unk>";
  expect_error([&] { load(j); }, {"model.unk_token", "<unk>", "not in model.vocab"});
}

TEST(TokenizerErrors, Merges) {
  json j = tiny();
  j["model"]["merges"] = {"a b", "ab zz"};
  expect_error([&] { load(j); }, {"dir/tokenizer.json: model.merges[1]", "'zz' is not in the vocabulary"});
  j["model"]["merges"] = json::array({json::array({"b", "a"})});
  expect_error([&] { load(j); }, {"model.merges[0]", "merged token 'ba' is not in the vocabulary"});
  j["model"]["merges"] = {"a  b"};
  expect_error([&] { load(j); }, {"model.merges[0]", "two tokens separated by one space"});
  j["model"]["merges"] = json::array({json::array({"a"})});
  expect_error([&] { load(j); }, {"model.merges[0]", "expected \"a b\" or [\"a\", \"b\"]"});
  j["model"]["merges"] = json::array({json::array({"a", "b"})});  // the list form is fine
  EXPECT_EQ(load(j).encode("ab"), std::vector<int32_t>{256});
}

TEST(TokenizerErrors, PreTokenizer) {
  json j = tiny();
  j["pre_tokenizer"] = {{"type", "Whitespace"}};
  expect_error([&] { load(j); },
               {"dir/tokenizer.json: pre_tokenizer.type", "'Whitespace'", "ByteLevel, Metaspace, Split, Digits"});
  j["pre_tokenizer"] = {{"type", "Sequence"}, {"pretokenizers", {{{"type", "BertPreTokenizer"}}}}};
  expect_error([&] { load(j); }, {"pre_tokenizer.pretokenizers[0].type", "'BertPreTokenizer'"});
  // A byte-level decoder needs the byte-level pre-tokenizer (and the reverse).
  j["pre_tokenizer"] = {{"type", "Metaspace"}};
  expect_error([&] { load(j); }, {"pre_tokenizer", "has no ByteLevel step but the decoder has"});
  j["pre_tokenizer"] = nullptr;
  expect_error([&] { load(j); }, {"pre_tokenizer", "has no ByteLevel step but the decoder has"});
  j["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"Regex", "\\s+"}}}, {"behavior", "Isolated"}};
  expect_error([&] { load(j); }, {"pre_tokenizer", "has no ByteLevel"});
  j["pre_tokenizer"] = {{"type", "Metaspace"}, {"prepend_scheme", "sometimes"}};
  expect_error([&] { load(j); }, {"pre_tokenizer.prepend_scheme", "'sometimes'", "always, first, never"});
  j["pre_tokenizer"] = {{"type", "Sequence"},
                        {"pretokenizers",
                         {{{"type", "Split"}, {"pattern", {{"Regex", "(unclosed"}}}, {"behavior", "Isolated"}},
                          {{"type", "ByteLevel"}}}}};
  expect_error([&] { load(j); }, {"pre_tokenizer.pretokenizers[0].pattern.Regex", "does not compile", "(unclosed"});
  j["pre_tokenizer"]["pretokenizers"][0] = {{"type", "Split"}, {"pattern", {{"Regex", "x"}}}, {"behavior", "Removed"}};
  expect_error([&] { load(j); },
               {"pre_tokenizer.pretokenizers[0].behavior", "Removed", "Isolated, MergedWithPrevious, MergedWithNext"});
}

TEST(TokenizerErrors, NormalizerDecoderPostProcessor) {
  json j = tiny();
  j["normalizer"] = {{"type", "Lowercase"}};
  expect_error([&] { load(j); }, {"dir/tokenizer.json: normalizer.type", "'Lowercase'", "NFC, Prepend, Replace"});
  j["normalizer"] = {{"type", "Sequence"}, {"normalizers", {{{"type", "NFC"}}, {{"type", "NFKD"}}}}};
  expect_error([&] { load(j); }, {"normalizer.normalizers[1].type", "'NFKD'", "not supported"});
  j["normalizer"] = {{"type", "Replace"}, {"pattern", {{"Regex", " {2,}"}}}, {"content", "\u2581"}};
  expect_error([&] { load(j); }, {"normalizer.pattern", "expected {\"String\": ...}", "Regex"});
  j["normalizer"] = {{"type", "Precompiled"}, {"precompiled_charsmap", "AAAA"}};
  expect_error([&] { load(j); }, {"normalizer.type", "'Precompiled'"});
  j = tiny();
  j["normalizer"] = {{"type", "NFC"}};
  EXPECT_NO_THROW(load(j));
  j = tiny();
  j["decoder"] = {{"type", "WordPiece"}};
  expect_error([&] { load(j); }, {"dir/tokenizer.json: decoder.type", "'WordPiece'", "ByteLevel, ByteFallback, Fuse"});
  j["decoder"] = {{"type", "Sequence"}, {"decoders", {{{"type", "Fuse"}}, {{"type", "CTC"}}}}};
  expect_error([&] { load(j); }, {"decoder.decoders[1].type", "'CTC'"});
  j["decoder"] = {{"type", "Strip"}, {"content", "ab"}, {"start", 1}, {"stop", 0}};
  expect_error([&] { load(j); }, {"decoder.content", "one character", "'ab'"});
  j["decoder"] = {{"type", "Metaspace"}};
  expect_error([&] { load(j); }, {"decoder", "has no ByteLevel step but the pre-tokenizer has"});
  j["decoder"] = nullptr;
  expect_error([&] { load(j); }, {"decoder", "null"});
  j = tiny();
  j["post_processor"] = {{"type", "Magic"}};
  expect_error([&] { load(j); }, {"post_processor.type", "Magic", "TemplateProcessing"});
  j["post_processor"] = {{"type", "TemplateProcessing"},
                         {"single", {{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}}}},
                         {"special_tokens", json::object()}};
  expect_error([&] { load(j); }, {"post_processor.special_tokens.<s>", "missing"});
  j["post_processor"]["special_tokens"] = {{"<s>", {{"id", "<s>"}, {"ids", {9999}}}}};
  expect_error([&] { load(j); }, {"post_processor special token id 9999", "out of range"});
  // Wrong JSON types deep inside become temper::Error naming the files, never a raw JSON exception.
  j = tiny();
  j["decoder"] = {{"type", "Sequence"}, {"decoders", 7}};
  expect_error([&] { load(j); }, {"dir/tokenizer.json"});
}

TEST(TokenizerErrors, AddedTokens) {
  json j = tiny();
  j["added_tokens"] = {{{"id", 5}}};
  expect_error([&] { load(j); }, {"added_tokens[0].content", "missing"});
  j["added_tokens"] = {{{"id", "x"}, {"content", "<x>"}}};
  expect_error([&] { load(j); }, {"added_tokens[0].id", "non-negative integer"});
  j["added_tokens"] = {{{"id", 300}, {"content", "<x>"}, {"special", "yes"}}};
  expect_error([&] { load(j); }, {"added_tokens[0].special", "true or false"});
}

TEST(TokenizerErrors, Config) {
  expect_error([] { load(tiny(), R"({"bos_token": "<s>"})"); },
               {"dir/tokenizer_config.json", "bos_token", "'<s>' is not a token"});
  expect_error([] { load(tiny(), R"({"eos_token": 3})"); },
               {"dir/tokenizer_config.json", "eos_token", "expected a string"});
  expect_error([] { load(tiny(), R"({"add_bos_token": true})"); }, {"add_bos_token", "no bos_token"});
  expect_error([] { load(tiny(), R"({"chat_template": 5})"); }, {"chat_template", "expected a string or a list"});
  const Tokenizer t = load(tiny(), R"({"bos_token": {"content": "<|end|>"}, "add_bos_token": true,
                                       "chat_template": [{"name": "tool_use", "template": "T"},
                                                         {"name": "default", "template": "D"}]})");
  EXPECT_EQ(t.bos_id(), 257);
  EXPECT_EQ(t.encode("a", true), (std::vector<int32_t>{257, 'a'}));
  EXPECT_EQ(t.chat_template(), "D");
}

TEST(TokenizerErrors, Spec) {
  TokenizerSpec s;
  s.pre = "gpt2";
  expect_error([&] { Tokenizer::from_spec(s); }, {"TokenizerSpec", "no tokens"});
  s.tokens = {"a", "b", "ab"};
  s.model = "bert";
  expect_error([&] { Tokenizer::from_spec(s); }, {"tokenizer model 'bert'", "'gpt2'", "'llama'"});
  s.model = "llama";
  s.scores = {0.0f};
  expect_error([&] { Tokenizer::from_spec(s); }, {"1 scores (tokenizer.ggml.scores) for 3 tokens"});
  s.scores.clear();
  s.merges = {{"a", "b"}};
  expect_error([&] { Tokenizer::from_spec(s); }, {"model 'llama' merges by tokenizer.ggml.scores", "1 merges"});
  s.merges.clear();
  s.model = "gpt2";
  s.pre = "mystery";
  expect_error([&] { Tokenizer::from_spec(s); },
               {"unknown pre-tokenizer 'mystery'", "known:", "smollm", "llama-bpe", "qwen2"});
  s.pre = "gpt2";
  s.token_types = {1, 1};
  expect_error([&] { Tokenizer::from_spec(s); }, {"2 token types", "for 3 tokens"});
  s.token_types.clear();
  s.bos_id = 7;
  expect_error([&] { Tokenizer::from_spec(s); }, {"bos_id 7 is out of range", "vocabulary of 3"});
  s.bos_id = -1;
  s.add_bos = true;
  expect_error([&] { Tokenizer::from_spec(s); }, {"add_bos is set but there is no bos_id"});
  s.add_bos = false;
  s.merges = {{"a", "c"}};
  expect_error([&] { Tokenizer::from_spec(s); }, {"tokenizer.ggml.merges[0] = 'a c'", "'c' is not in the vocabulary"});
  expect_error([&] { s.add_merge_strings({"nospace"}); },
               {"tokenizer.ggml.merges[0] = 'nospace'", "separated by a space"});
}

}  // namespace

namespace {

// A deterministic smoke fuzz of the tokenizer.json parser: byte flips, truncations, splices of a
// valid file either load (and then encode/decode work) or throw temper::Error, nothing else.
TEST(TokenizerErrors, MutatedJsonOnlyThrowsTemperErrors) {
  const std::string base = tiny().dump();
  uint64_t state = 0x9E3779B97F4A7C15ull;
  auto next = [&] {
    state ^= state << 13, state ^= state >> 7, state ^= state << 17;
    return state;
  };
  int loaded = 0, errors = 0;
  for (int k = 0; k < 1500; ++k) {
    std::string s = base;
    const int edits = 1 + static_cast<int>(next() % 3);
    for (int e = 0; e < edits; ++e) {
      const size_t at = next() % s.size();
      switch (next() % 4) {
        case 0:
          s[at] = static_cast<char>(next());
          break;
        case 1:
          s.resize(at);
          break;
        case 2:
          s.insert(at, s.substr(next() % s.size(), 1 + next() % 16));
          break;
        default:
          s.erase(at, 1 + next() % 8);
          break;
      }
      if (s.empty()) s = "{";
    }
    try {
      const Tokenizer t = Tokenizer::from_hf_json(s, "", "fuzz.json");
      const std::vector<int32_t> ids = t.encode("Hello, world! 123 \xF0\x9F\x98\x80 <|end|>");
      (void)t.decode(ids);
      ++loaded;
    } catch (const Error&) {
      ++errors;
    }
  }
  EXPECT_GT(loaded, 0);
  EXPECT_GT(errors, 0);
  // Valid JSON with a node replaced by a value of another type (or removed).
  const json flat = tiny().flatten();
  std::vector<std::string> pointers;
  for (auto it = flat.begin(); it != flat.end(); ++it) pointers.push_back(it.key());
  for (const char* p : {"/model", "/model/vocab", "/model/merges", "/pre_tokenizer", "/decoder", "/added_tokens",
                        "/added_tokens/0", ""}) {
    pointers.push_back(p);
  }
  const json replacements[] = {nullptr, 7, -1, 1e300, "x", json::array(), json::object(), true, json::array({1, "a"})};
  int typed_errors = 0;
  for (int k = 0; k < 600; ++k) {
    json j = tiny();
    const std::string ptr = pointers[next() % pointers.size()];
    if (next() % 5 == 0 && !ptr.empty()) {
      const json::json_pointer jp(ptr);
      j[jp.parent_pointer()].erase(jp.back());
    } else {
      j[json::json_pointer(ptr)] = replacements[next() % std::size(replacements)];
    }
    try {
      const Tokenizer t = Tokenizer::from_hf_json(j.dump(), "", "fuzz.json");
      (void)t.decode(t.encode("ab c <|end|>"));
    } catch (const Error&) {
      ++typed_errors;
    }
  }
  EXPECT_GT(typed_errors, 100);
}

TEST(TokenizerErrors, MutatedSentencePiecePipelineOnlyThrowsTemperErrors) {
  // The llama2 fixture with the normalizer / pre-tokenizer / decoder of one of the three
  // SentencePiece-style fixtures, one node of them replaced by a value of another type or removed.
  const json base = test::load_json("tokenizer/llama2/tokenizer.json");
  std::vector<json> pipelines;
  for (const char* name : {"llama2", "mistral", "gemma"}) {
    const json f = test::load_json(std::string("tokenizer/") + name + "/tokenizer.json");
    pipelines.push_back(
        {{"normalizer", f["normalizer"]}, {"pre_tokenizer", f["pre_tokenizer"]}, {"decoder", f["decoder"]}});
  }
  const json replacements[] = {nullptr, 7, -1, "x", "", json::array(), json::object(), true, "Metaspace", "first"};
  uint64_t state = 0x2545F4914F6CDD1Dull;
  auto next = [&] {
    state ^= state << 13, state ^= state >> 7, state ^= state << 17;
    return state;
  };
  int loaded = 0, errors = 0;
  for (int k = 0; k < 300; ++k) {
    json p = pipelines[next() % pipelines.size()];
    const json flat = p.flatten();
    std::vector<std::string> pointers;
    for (auto it = flat.begin(); it != flat.end(); ++it) pointers.push_back(it.key());
    const json::json_pointer jp(pointers[next() % pointers.size()]);
    if (next() % 4 == 0) {
      p[jp.parent_pointer()].erase(jp.back());
    } else {
      p[jp] = replacements[next() % std::size(replacements)];
    }
    json j = base;
    for (auto it = p.begin(); it != p.end(); ++it) j[it.key()] = it.value();
    try {
      const Tokenizer t = Tokenizer::from_hf_json(j.dump(), "", "fuzz.json");
      (void)t.decode(t.encode(" Hello  w\xC3\xB6rld \xE4\xB8\x96<|endoftext|>x"));
      (void)t.to_hf_json();
      ++loaded;
    } catch (const Error&) {
      ++errors;
    }
  }
  EXPECT_GT(loaded, 30);
  EXPECT_GT(errors, 30);
}

}  // namespace
