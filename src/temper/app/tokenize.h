// `temper tokenize --model M (--text T | --file F) [--special]`: the ids as a JSON list (no BOS/EOS
// unless --special); `temper detokenize --model M --ids 1,2,3`: the text. M is a model directory,
// a tokenizer.json, or a GGUF file.
#pragma once

#include <string>

namespace temper::app {

struct TokenizeOptions {
  std::string model, text, file, ids;
  bool special = false;
  bool skip_special = false;
};

int tokenize(const TokenizeOptions& o);
int detokenize(const TokenizeOptions& o);

}  // namespace temper::app
