// Shared helpers of the text tests: the golden files of tests/data/tokenizer (written by
// tools/ref/make_tokenizer_goldens.py) and tokenizers loaded once per process.
#pragma once

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

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

}  // namespace temper::test
