#include "temper/app/tokenize.h"

#include <cstdio>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "temper/app/id_list.h"
#include "temper/app/model_source.h"
#include "temper/core/error.h"

namespace temper::app {

int tokenize(const TokenizeOptions& o) {
  TEMPER_CHECK(o.text.empty() != o.file.empty()) << "give exactly one of --text and --file";
  std::string text = o.text;
  if (!o.file.empty()) {
    std::ifstream in(o.file, std::ios::binary);
    TEMPER_CHECK(in.good()) << o.file << ": cannot open";
    std::stringstream ss;
    ss << in.rdbuf();
    text = ss.str();
  }
  auto tok = load_tokenizer(o.model);
  nlohmann::json j = tok->encode(text, o.special);
  std::printf("%s\n", j.dump().c_str());
  return 0;
}

int detokenize(const TokenizeOptions& o) {
  std::string src = o.ids;
  if (src.empty()) {  // a JSON list on stdin
    std::stringstream ss;
    ss << std::cin.rdbuf();
    src = ss.str();
  }
  std::vector<int32_t> ids = parse_id_list(src, o.ids.empty() ? "stdin" : "--ids");
  auto tok = load_tokenizer(o.model);
  for (int32_t id : ids)
    TEMPER_CHECK(id >= 0 && id < tok->vocab_size()) << "token id " << id << " outside the vocabulary [0, " << tok->vocab_size() << ")";
  std::string out = tok->decode(ids, o.skip_special);
  std::fwrite(out.data(), 1, out.size(), stdout);
  std::printf("\n");
  return 0;
}

}  // namespace temper::app
