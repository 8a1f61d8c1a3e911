// The GraphPO tests' shared setting: arithmetic "3+4*2=" (answer 11) read through the byte codec, a group's
// completions fed to a rollout hook token by token in lockstep (as the engine runs a group), a group of hand-written
// trajectories, and one of the method's metrics.
#pragma once

#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "rl/byte_codec.h"
#include "rl/letter_task.h"
#include "temper/rl/methods/graphpo.h"
#include "temper/tasks/arithmetic.h"

namespace temper::test {

struct GraphPoSetting {
  rl::PromptCodec codec = byte_codec();
  rl::MethodEnv env;
  std::vector<tasks::Problem> problems = std::vector<tasks::Problem>(1);
  rl::RolloutRound round;
  GraphPoSetting() {
    env.task = std::make_shared<tasks::ArithmeticTask>(tasks::ArithmeticConfig{});
    env.codec = &codec;
    problems[0].id = "0";
    problems[0].prompt = "3+4*2=";
    problems[0].answer = "11";
    round.step = 1;
    round.problems = &problems;
  }
  GraphPoSetting(const GraphPoSetting&) = delete;
  GraphPoSetting& operator=(const GraphPoSetting&) = delete;
};

// What the hook decided while member m wrote texts[m], one byte a step, all members in lockstep.
struct Lockstep {
  std::vector<rollout::Completion> completions;  // each member's tokens up to where it stopped
  std::vector<bool> stopped;
  std::map<int64_t, size_t> forked_at;  // member -> its tokens when it forked
  std::vector<int64_t> forks;           // the forks of each decision that forked, in order
};

inline Lockstep run_lockstep(rollout::RolloutHook& hook, const std::vector<std::string>& texts) {
  const size_t n = texts.size();
  Lockstep r{std::vector<rollout::Completion>(n), std::vector<bool>(n, false), {}, {}};
  size_t longest = 0;
  for (const std::string& t : texts) longest = std::max(longest, t.size());
  rollout::RolloutRequest req;
  for (size_t pos = 0; pos < longest; ++pos)
    for (size_t m = 0; m < n; ++m) {
      if (r.stopped[m] || pos >= texts[m].size()) continue;
      r.completions[m].member = static_cast<int64_t>(m);
      r.completions[m].tokens.push_back(static_cast<unsigned char>(texts[m][pos]));
      const rollout::HookDecision d = hook.after_token(req, r.completions[m]);
      if (d.stop) r.stopped[m] = true;
      if (d.forks > 0) {
        r.forks.push_back(d.forks);
        r.forked_at[static_cast<int64_t>(m)] = pos + 1;
      }
    }
  return r;
}

// One group of problem 0: member i writes texts[i] after the prompt "q:" and earns rewards[i]; every token counted.
inline rl::Batch graphpo_group(const std::vector<std::string>& texts, const std::vector<double>& rewards) {
  rl::Batch b;
  b.problems.resize(1);
  for (size_t i = 0; i < texts.size(); ++i) {
    rl::Trajectory t;
    t.problem = 0;
    t.group = 0;
    t.member = static_cast<int64_t>(i);
    t.prompt = ids("q:");
    t.tokens = ids(texts[i]);
    t.text = texts[i];
    t.reward = rewards[i];
    t.loss_mask.assign(t.tokens.size(), 1.f);
    b.traj.push_back(t);
  }
  return b;
}

inline double graphpo_metric(const rl::GraphPo& g, const std::string& name) {
  Metrics m;
  g.metrics(m);
  return value(m, name);
}

}  // namespace temper::test
