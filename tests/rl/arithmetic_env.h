// The method tests' environment on the arithmetic task read through the byte codec (DRE, ZPPO): the task, the codec
// and a MethodEnv on them whose verifier is the task's and whose policy is the test's, a scripted one; every request
// the policy is given is kept in `requests`.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "rl/byte_codec.h"
#include "temper/rl/method.h"
#include "temper/tasks/arithmetic.h"

namespace temper::test {

struct ArithmeticEnv {
  // Request i (of the round) -> the policy's completions for it.
  using Policy = std::function<std::vector<rollout::Completion>(int64_t, const rollout::RolloutRequest&)>;

  std::shared_ptr<tasks::ArithmeticTask> task = std::make_shared<tasks::ArithmeticTask>(tasks::ArithmeticConfig{});
  rl::PromptCodec codec = byte_codec();
  std::vector<rollout::RolloutRequest> requests;  // every request the policy was given, in order

  // max_new = 64 and `context` tokens; the object must outlive the env (the env reads its task and codec).
  rl::MethodEnv method_env(int64_t context, Policy policy) {
    rl::MethodEnv e;
    e.task = task;
    e.codec = &codec;
    e.max_new = 64;
    e.context = context;
    e.generate = [this, policy](const std::vector<rollout::RolloutRequest>& reqs) {
      requests.insert(requests.end(), reqs.begin(), reqs.end());
      std::vector<rollout::Completion> out;
      for (size_t i = 0; i < reqs.size(); ++i)
        for (rollout::Completion& c : policy(static_cast<int64_t>(i), reqs[i])) out.push_back(std::move(c));
      return out;
    };
    e.verify = [this](const tasks::Problem& p, const std::string& text) { return task->verify(p, text); };
    return e;
  }
};

// Request i's group of n scripted completions: member 0 writes `first`, the others `rest`.
inline std::vector<rollout::Completion> scripted_group(int64_t i, int64_t n, const std::string& first,
                                                       const std::string& rest) {
  std::vector<rollout::Completion> out;
  for (int64_t m = 0; m < n; ++m) out.push_back(scripted_completion(i, m, m == 0 ? first : rest));
  return out;
}

}  // namespace temper::test
