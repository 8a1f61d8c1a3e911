// The RL tests' fixture: a tiny random Llama, a made-up task whose reward is the share of the letter
// 'a' in the completion (problems whose index is divisible by 3 always score 1 when `uniform_`),
// a letters codec and a small RL configuration.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>

#include "common/models.h"
#include "temper/rl/evaluate.h"
#include "temper/rl/rl_trainer.h"

namespace temper::test {

using namespace temper::rl;

inline char letter(int32_t t) { return static_cast<char>('a' + t % 26); }

// Prompt: 3 tokens from the index; reward: the share of 'a' in the completion. Problems whose index
// is divisible by 3 always score 1 (uniform groups, for dynamic sampling).
class LetterTask : public tasks::Task {
 public:
  std::string name() const override { return "letters"; }
  int64_t size(tasks::Split) const override { return -1; }
  tasks::Problem problem(tasks::Split, uint64_t i) const override {
    tasks::Problem p;
    p.id = std::to_string(i);
    p.prompt = std::string(1, letter(int32_t(i % 7))) + letter(int32_t(i % 5)) + letter(int32_t(i % 3));
    p.answer = "a";
    return p;
  }
  tasks::Verdict verify(const tasks::Problem& p, const std::string& c) const override {
    tasks::Verdict v;
    if (std::stoul(p.id) % 3 == 0 && uniform_) return v.reward = 1, v.correct = true, v;
    double n = 0;
    for (char ch : c) n += ch == 'a';
    v.reward = c.empty() ? 0 : n / double(c.size());
    v.correct = v.reward > 0.5;
    return v;
  }
  bool uniform_ = false;
};

inline PromptCodec codec() {
  PromptCodec c;
  auto enc = [](const std::string& s) {  // letters -> 1..26, anything else (a method's prompt text) -> 27
    std::vector<int32_t> ids;
    for (char ch : s) ids.push_back(ch >= 'a' && ch <= 'z' ? ch - 'a' + 1 : 27);
    return ids;
  };
  c.encode_prompt = [enc](const tasks::Problem& p) { return enc(p.shown()); };
  c.encode_text = enc;
  c.encode_completion = [](const std::string& s) { return std::vector<int32_t>(s.size(), 0); };
  c.decode = [](const std::vector<int32_t>& ids) {
    std::string s;
    for (int32_t t : ids) s += letter(t);
    return s;
  };
  return c;
}

inline RlConfig config() {
  RlConfig c;
  c.prompts_per_step = 4;
  c.group_size = 6;
  c.max_new = 6;
  c.optimizer.lr.peak = 3e-3;
  c.optimizer.adamw.weight_decay = 0;
  c.kv_memory_mb = 4;
  c.seed = 5;
  return c;
}

inline double value(const Metrics& m, const std::string& k) {
  for (auto& [n, v] : m)
    if (n == k) return v;
  ADD_FAILURE() << "no metric " << k;
  return NAN;
}

// Evaluation of the letters task on the tiny model: n problems, up to max_new tokens, a small KV cache.
inline EvalConfig eval_config(int64_t problems, int64_t max_new) {
  EvalConfig ec;
  ec.problems = problems;
  ec.max_new = max_new;
  ec.kv_memory_mb = 4;
  return ec;
}

struct RlSetup {
  ModelConfig cfg = test::small_config(Arch::llama, 64);
  Transformer model{cfg};
  std::shared_ptr<LetterTask> task = std::make_shared<LetterTask>();
  reward::SafeReward safe;
  explicit RlSetup(uint64_t seed = 3) { model.init_random(seed, 0.05f); }
  RlSetup(const ModelConfig& c, uint64_t seed) : cfg(c), model(c) { model.init_random(seed, 0.05f); }
};

}  // namespace temper::test
