// Tokenizer throughput: encode and decode MB/s and tokens/s of temper's byte-level BPE on a text
// file (or the generated text of tests/data/tokenizer/corpus.json), one thread. The peer is
// Hugging Face tokenizers on the same input (the command in docs/TOKENIZER.md). Prints one JSON line.
//   tokenizer_bench TOKENIZER_JSON [TEXT_FILE] [--repeat N]
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "temper/core/error.h"
#include "temper/text/tokenizer.h"

namespace {

std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  TEMPER_CHECK(f.good()) << path << ": cannot open";
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) {
  try {
    if (argc < 2) {
      std::fprintf(stderr, "usage: %s TOKENIZER_JSON [TEXT_FILE | CORPUS_JSON] [--repeat N]\n", argv[0]);
      return 2;
    }
    std::string text_path;
    int repeat = 50;
    for (int i = 2; i < argc; ++i) {
      if (!std::strcmp(argv[i], "--repeat") && i + 1 < argc) {
        repeat = std::atoi(argv[++i]);
      } else {
        text_path = argv[i];
      }
    }
    auto t0 = std::chrono::steady_clock::now();
    const temper::text::Tokenizer tok = temper::text::Tokenizer::from_hf_files(argv[1]);
    const double load_s = seconds_since(t0);
    std::string unit;
    if (text_path.size() > 5 && text_path.substr(text_path.size() - 5) == ".json") {
      unit = nlohmann::json::parse(slurp(text_path))["long_text"].get<std::string>();
    } else if (!text_path.empty()) {
      unit = slurp(text_path);
    } else {
      unit = "The quick brown fox jumps over the lazy dog. 12345 \xE4\xB8\x96\xE7\x95\x8C \xF0\x9F\x98\x80\n";
    }
    std::string text;
    for (int i = 0; i < repeat; ++i) text += unit;
    (void)tok.encode(unit);  // warm the word cache as a long-running engine has it
    t0 = std::chrono::steady_clock::now();
    const std::vector<int32_t> ids = tok.encode(text);
    const double enc_s = seconds_since(t0);
    t0 = std::chrono::steady_clock::now();
    const std::string back = tok.decode(ids);
    const double dec_s = seconds_since(t0);
    nlohmann::json out = {{"engine", "temper"},
                          {"bytes", text.size()},
                          {"tokens", ids.size()},
                          {"load_s", load_s},
                          {"encode_mb_per_s", text.size() / enc_s / 1e6},
                          {"encode_tokens_per_s", ids.size() / enc_s},
                          {"decode_mb_per_s", back.size() / dec_s / 1e6},
                          {"round_trip", back == text}};
    std::cout << out.dump() << "\n";
    return 0;
  } catch (const temper::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
