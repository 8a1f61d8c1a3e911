// `temper logits --model M --ids 1,2,3`: one forward pass over the given token ids, printed as
// JSON (per position: the top-1 id and, with --full, every logit). For checking temper against
// another implementation of the same model.
#pragma once

#include <string>

namespace temper::app {

struct LogitsOptions {
  std::string model;
  std::string ids;  // comma-separated
  bool full = false;
};

int logits(const LogitsOptions& o);

}  // namespace temper::app
