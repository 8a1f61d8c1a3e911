// Client mode ([env] mode = "client"): the user's agent code trains as it is. For each episode the
// environment program runs the agent (env::Environment::run) against an OpenAI-compatible endpoint that
// temper serves on loopback with the policy itself (serve/server.h over the rollout engine: every call
// joins one continuously batched run); each episode has its own API key, so every token the policy
// samples for it is recorded with its log-prob. An episode's calls become trajectories: a call whose prompt
// extends the previous call's prompt + reply (the usual agent loop: append the reply and the tool results,
// re-render) continues the same sequence, its new prompt tokens appended out of the loss; any other call
// starts a new trajectory. Every trajectory of an episode gets the episode's return. The run's sampler,
// seed and rl.max_new (per episode) override what the agent asks for; n > 1 gives one trajectory per sample.
#pragma once

#include <cstdint>
#include <string>

#include "temper/env/environment.h"
#include "temper/rl/env_rollout.h"
#include "temper/serve/server.h"

namespace temper::agent {

struct ClientRolloutConfig {
  int64_t threads = 4;        // episodes at once (each blocks one thread while its agent runs)
  double failure_reward = 0;  // the return of an episode whose agent failed
};

class ClientRollout final : public rl::ConversationSource {
 public:
  ClientRollout(env::Environment& env, serve::ServedModel model, ClientRolloutConfig cfg);
  std::vector<rl::Trajectory> run(rollout::RolloutEngine& engine, const std::vector<tasks::Problem>& problems,
                                  size_t first, int64_t group_size, const rollout::RolloutRequest& request,
                                  int64_t context, const std::string& episode_prefix, size_t offset) override;
  // env/calls and env/trajectories (means per episode), env/failures, env/solved (a share of the episodes),
  // env/refused_calls, env/episodes.
  void metrics(rl::Metrics& m) const override;
  void merge_metrics(rl::Metrics& into, const rl::Metrics& block) const override;  // counts add, means weighted

 private:
  struct Stats {
    int64_t episodes = 0, calls = 0, trajectories = 0, failures = 0, solved = 0, refused_calls = 0;
  };
  env::Environment& env_;
  serve::ServedModel model_;
  ClientRolloutConfig cfg_;
  Stats stats_;
};

}  // namespace temper::agent
