// Shared helpers of the text tests: the golden files of tests/data/tokenizer (written by
// tools/ref/make_tokenizer_goldens.py), tokenizers loaded once per process, the corpus, the check
// of a tokenizer against the goldens, and SmolLM2's TokenizerSpec as the GGUF reader fills it.
#pragma once

#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "common/test_data.h"
#include "temper/text/tokenizer.h"

namespace temper::test {

inline nlohmann::json load_json(const std::string& rel) {
  std::ifstream f(test_data(rel), std::ios::binary);
  if (!f.good()) throw std::runtime_error("cannot open " + test_data(rel));
  std::stringstream ss;
  ss << f.rdbuf();
  return nlohmann::json::parse(ss.str());
}

// name: gpt2 | llama3 | qwen2 | smollm2 (tokenizer.json + tokenizer_config.json), loaded once.
inline const text::Tokenizer& golden_tokenizer(const std::string& name) {
  static std::map<std::string, text::Tokenizer> cache;
  auto it = cache.find(name);
  if (it == cache.end()) {
    const std::string dir = "tokenizer/" + name + "/";
    it = cache
             .emplace(name, text::Tokenizer::from_hf_files(test_data(dir + "tokenizer.json"),
                                                           test_data(dir + "tokenizer_config.json")))
             .first;
  }
  return it->second;
}

using text::Tokenizer;
using text::TokenizerSpec;
using text::TokenType;

struct Corpus {
  std::vector<std::string> texts;  // hostile cases, then the long generated text
  size_t n_hostile = 0;
};

inline const Corpus& corpus() {
  static const Corpus c = [] {
    Corpus c;
    const auto j = load_json("tokenizer/corpus.json");
    for (const auto& s : j["cases"]) c.texts.push_back(s.get<std::string>());
    c.n_hostile = c.texts.size();
    c.texts.push_back(j["long_text"].get<std::string>());
    return c;
  }();
  return c;
}

inline std::string show(const std::string& s) {
  std::string o;
  for (unsigned char c : s.substr(0, 60)) {
    if (c == '\n') {
      o += "\\n";
    } else if (c < 0x20) {
      o += "\\x" + std::string(1, "0123456789abcdef"[c >> 4]) + "0123456789abcdef"[c & 15];
    } else {
      o += static_cast<char>(c);
    }
  }
  return s.size() > 60 ? o + "..." : o;
}

inline std::vector<int32_t> ids_of(const nlohmann::json& j) {
  return j.get<std::vector<int32_t>>();
}

// Every corpus string: ids, decode and decode(skip_special) equal the golden; returns the number of
// strings for which decode(encode(x)) == x.
inline int check_goldens(const Tokenizer& tok, const std::string& name) {
  const auto g = load_json("tokenizer/" + name + "/golden.json");
  const Corpus& c = corpus();
  EXPECT_EQ(g["cases"].size(), c.texts.size());
  int round_trips = 0;
  for (size_t i = 0; i < c.texts.size() && i < g["cases"].size(); ++i) {
    const auto& gc = g["cases"][i];
    const std::vector<int32_t> ids = tok.encode(c.texts[i]);
    EXPECT_EQ(ids, ids_of(gc["ids"])) << name << " case " << i << ": '" << show(c.texts[i]) << "'";
    EXPECT_EQ(tok.decode(ids_of(gc["ids"])), gc["decoded"].get<std::string>()) << name << " case " << i;
    EXPECT_EQ(tok.decode(ids_of(gc["ids"]), true), gc["decoded_skip_special"].get<std::string>())
        << name << " case " << i;
    if (tok.decode(ids) == c.texts[i]) ++round_trips;
  }
  for (const auto& w : g["with_special"]) {
    EXPECT_EQ(tok.encode(w["text"].get<std::string>(), /*add_special=*/true), ids_of(w["ids"]))
        << name << " with_special '" << show(w["text"]) << "'";
  }
  for (const auto& w : g["no_parse_special"]) {
    EXPECT_EQ(tok.encode(w["text"].get<std::string>(), false, /*parse_special=*/false), ids_of(w["ids"]))
        << name << " no_parse_special '" << show(w["text"]) << "'";
  }
  return round_trips;
}

// A TokenizerSpec as the GGUF reader produces it for SmolLM2, built from the golden tokenizer.json
// (GGUF tokens == vocab by id, merges "a b", control type for special added tokens, pre "smollm").
inline TokenizerSpec smollm2_spec() {
  const auto tj = load_json("tokenizer/smollm2/tokenizer.json");
  const auto cfg = load_json("tokenizer/smollm2/tokenizer_config.json");
  TokenizerSpec s;
  s.pre = "smollm";
  const auto& vocab = tj["model"]["vocab"];
  s.tokens.resize(vocab.size());
  for (auto it = vocab.begin(); it != vocab.end(); ++it) s.tokens.at(it.value().get<size_t>()) = it.key();
  s.token_types.assign(s.tokens.size(), static_cast<int32_t>(TokenType::kNormal));
  for (const auto& a : tj["added_tokens"]) {
    s.token_types.at(a["id"].get<size_t>()) =
        static_cast<int32_t>(a["special"].get<bool>() ? TokenType::kControl : TokenType::kUserDefined);
  }
  std::vector<std::string> merges;
  for (const auto& m : tj["model"]["merges"]) merges.push_back(m.get<std::string>());
  s.add_merge_strings(merges);
  auto id = [&](const char* key) {
    const std::string t = cfg[key].get<std::string>();
    return static_cast<int32_t>(tj["model"]["vocab"][t].get<int>());
  };
  s.bos_id = id("bos_token");
  s.eos_id = id("eos_token");
  s.pad_id = id("pad_token");
  s.unk_id = id("unk_token");
  s.add_bos = cfg["add_bos_token"].get<bool>();
  s.chat_template = cfg["chat_template"].get<std::string>();
  return s;
}

}  // namespace temper::test
