// `temper generate --model M --prompt TEXT`: text through the model's chat template (or --raw
// continuation), greedy or sampled, streamed to stdout token by token; diagnostics to stderr.
// Single sequence over a KV cache; the batched rollout engine is separate.
#pragma once

#include <cstdint>
#include <string>

namespace temper::app {

struct GenerateOptions {
  std::string model, prompt, system, chat_template;
  bool raw = false, greedy = false;
  int64_t max_new = 128;
  float temperature = 0.7f, top_p = 0.9f, min_p = 0.0f;
  int64_t top_k = 0;
  uint64_t seed = 0;
  int threads = 0;
};

int generate(const GenerateOptions& o);

}  // namespace temper::app
