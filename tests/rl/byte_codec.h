// A byte-level codec for RL tests on text tasks: token = byte, 256 = end of sequence.
#pragma once

#include <array>
#include <string>
#include <string_view>
#include <vector>

#include "temper/rl/prompt_codec.h"
#include "temper/rollout/engine.h"

namespace temper::test {

constexpr int32_t kEos = 256;

inline const std::array<std::string, 257>& bytes_table() {
  static const std::array<std::string, 257> t = [] {
    std::array<std::string, 257> a;
    for (int i = 0; i < 256; ++i) a[static_cast<size_t>(i)] = std::string(1, static_cast<char>(i));
    return a;
  }();
  return t;
}

inline std::vector<int32_t> ids(const std::string& s) {
  std::vector<int32_t> v;
  for (unsigned char c : s) v.push_back(c);
  return v;
}

inline rl::PromptCodec byte_codec() {
  rl::PromptCodec c;
  c.encode_prompt = [](const tasks::Problem& p) { return ids(p.shown()); };
  c.encode_text = ids;
  c.encode_completion = [](const std::string& s) {
    auto v = ids(s);
    v.push_back(kEos);
    return v;
  };
  c.decode = [](const std::vector<int32_t>& v) {
    std::string s;
    for (int32_t t : v)
      if (t < 256) s += static_cast<char>(t);
    return s;
  };
  c.token_bytes = [](int32_t t) -> std::string_view { return t >= 0 && t < 256 ? bytes_table()[static_cast<size_t>(t)] : std::string_view(); };
  c.stop_ids = {kEos};
  return c;
}

// A scripted policy's completion: `forced` tokens, then `text` and the end token, with fixed
// log-probs (sampling -0.25, policy -0.5) and entropy 0.75.
inline rollout::Completion scripted_completion(int64_t request, int64_t member, const std::string& text,
                                               const std::vector<int32_t>& forced = {}) {
  rollout::Completion c;
  c.request = request;
  c.member = member;
  c.tokens = forced;
  c.forced = static_cast<int64_t>(forced.size());
  for (int32_t t : ids(text)) c.tokens.push_back(t);
  c.tokens.push_back(kEos);
  c.sample_logprob.assign(c.tokens.size(), -0.25f);
  c.policy_logprob.assign(c.tokens.size(), -0.5f);
  c.entropy.assign(c.tokens.size(), 0.75f);
  c.finish = rollout::FinishReason::stop;
  return c;
}

// Occurrences of x in s (overlapping).
inline size_t occurrences(const std::string& s, const std::string& x) {
  size_t n = 0;
  for (size_t at = s.find(x); at != std::string::npos; at = s.find(x, at + 1)) ++n;
  return n;
}

}  // namespace temper::test
