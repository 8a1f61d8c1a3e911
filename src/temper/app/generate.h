// `temper generate --model M --prompt TEXT`: text through the model's chat template (or --raw
// continuation), greedy or sampled, streamed to stdout token by token; diagnostics to stderr.
// `--prompts FILE.jsonl -n G`: every prompt (text or chat messages) G times through the batched
// rollout engine, written as JSONL (text, token ids, log-probs, finish reason).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace temper::app {

struct GenerateOptions {
  std::string model, prompt, system, chat_template;
  std::string prompts_file;  // JSONL: {"prompt": "..."} or {"messages": [{"role", "content"}...]} per line
  std::string out;           // JSONL output (default stdout) for --prompts
  int64_t samples = 1;       // -n: samples per prompt (a group sharing the prompt's KV blocks)
  bool raw = false, greedy = false;
  int64_t max_new = 128;
  float temperature = 0.7f, top_p = 0.9f, min_p = 0.0f;
  int64_t top_k = 0;
  float repetition_penalty = 1.0f, presence_penalty = 0.0f, frequency_penalty = 0.0f;
  int64_t penalty_last_n = 64;
  std::vector<std::string> stop;  // stop strings
  uint64_t seed = 0;
  int threads = 0;
  std::string device = "cpu";  // cpu, cuda, cuda:N (the model's forward on the GPU; sampling on the host)
  // Fair RL: a policy trained with [rl.fair] reads its trade-off from the prompt: the preference
  // ("0.7,0.3") is written with preference_prefix before each prompt's text (its last user message).
  std::string preference, preference_prefix = "<pref {p}>\n";
  std::string ggf;  // fair RL's Gini weights ("0.7,0.3") for {w} in preference_prefix; empty: the linear weights
  // Speculative decoding with the model's own 4-bit drafter (EfficientRollout's; always on when asked):
  // the output is distributed exactly as without it (greedy: the same text).
  bool speculative = false;
  int64_t gamma = 5;
  std::string draft_head = "bf16";
};

int generate(const GenerateOptions& o);

}  // namespace temper::app
