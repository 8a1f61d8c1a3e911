// Client-mode RL (agent/client_rollout.h) on SmolLM2-135M-Instruct: a Python agent (examples/agents/
// two_turn_agent.py) talks to the policy through the loopback OpenAI endpoint; every call is recorded by
// its episode's API key, a second call that extends the first (the agent appended the reply and a user turn)
// continues the same trajectory with the new prompt tokens appended out of the loss, each sampled token's
// recorded log-prob equals the training forward's over the stitched sequence, a wrong key gets 401, and
// every trajectory carries its episode's return; two blocks' env/ metrics merge (counts add, means stay). Skipped
// without the cached GGUF or python3.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "temper/agent/client_rollout.h"
#include "temper/app/model_source.h"
#include "temper/app/served_model.h"
#include "temper/env/program_environment.h"
#include "temper/reward/child_process.h"

using namespace temper;

TEST(ClientRollout, AnAgentsCallsBecomeTrajectoriesWithTheTrainingLogprobs) {
  const std::string root = TEMPER_SOURCE_DIR;
  const std::string gguf = root + "/.cache/models/SmolLM2-135M-Instruct.Q4_1.gguf";
  if (!std::filesystem::exists(gguf)) GTEST_SKIP() << gguf << " missing (scripts/bootstrap fetches it)";
  if (reward::find_executable("python3").empty()) GTEST_SKIP() << "no python3";
  app::LoadedModel lm = app::load_model(gguf);
  Transformer& model = *lm.model;
  KvPool pool(model.config(), 16, 256);
  rollout::EngineConfig ec{8, [&](int32_t id) { return lm.tokenizer->token_bytes(id); }};
  rollout::RolloutEngine engine(model, pool, ec);

  env::EnvOptions eo;
  eo.kind = "program";
  eo.program = {"python3", root + "/examples/agents/two_turn_agent.py"};
  eo.workers = 2;
  eo.timeout_s = 120;
  eo.env = {"TEMPER_AGENT_CLIENT=stdlib"};
  env::ProgramEnvironment env(eo);
  env.start();
  agent::ClientRolloutConfig cc;
  cc.threads = 2;
  agent::ClientRollout cr(
      env, app::make_served_model("policy", lm.tokenizer, lm.eos_ids, "", "auto", model.config(), 8, 16 * 256), cc);

  std::vector<tasks::Problem> problems(2);
  for (int i = 0; i < 2; ++i) problems[static_cast<size_t>(i)].index = i;
  rollout::SamplerConfig sc;
  sc.temperature = 0.7f;
  const rollout::RolloutRequest proto = rollout::make_request({0}, 2, 200, 2048, sc, {}, 11, 0);
  std::vector<rl::Trajectory> traj = cr.run(engine, problems, 0, 2, proto, 2048, "t", 0);
  rl::Metrics m;
  cr.metrics(m);
  auto metric = [&](const std::string& k) -> double {
    for (auto& [n, v] : m)
      if (n == k) return v;
    return NAN;
  };
  EXPECT_EQ(metric("env/failures"), 0.0);
  EXPECT_EQ(metric("env/calls"), 2.0);          // two calls per episode
  EXPECT_EQ(metric("env/refused_calls"), 4.0);  // the wrong key, once per episode
  EXPECT_EQ(metric("env/episodes"), 4.0);
  // Two blocks of a round (two explorer ranks, rl/async_remote.h) merge: counts add, means per episode are weighted
  // by the blocks' episodes. The second block is made up: 1 episode, every value 1 more (a weighting that ignores the
  // counts, or a mean over the wrong count, gives other numbers).
  auto is_count = [](const std::string& k) {
    return k == "env/failures" || k == "env/refused_calls" || k == "env/episodes";
  };
  rl::Metrics b = m;
  for (auto& [n, v] : b) v = n == "env/episodes" ? 1.0 : v + 1.0;
  rl::Metrics two;
  cr.merge_metrics(two, m);
  cr.merge_metrics(two, b);
  ASSERT_EQ(two.size(), m.size());
  for (size_t i = 0; i < m.size(); ++i) {
    const double want = is_count(m[i].first) ? m[i].second + b[i].second : (4.0 * m[i].second + b[i].second) / 5.0;
    EXPECT_DOUBLE_EQ(two[i].first == m[i].first ? two[i].second : NAN, want) << m[i].first;
  }
  ASSERT_GE(traj.size(), 4u);
  int merged = 0;
  double worst = 0;
  for (const rl::Trajectory& t : traj) {
    EXPECT_TRUE(t.scored);
    EXPECT_TRUE(t.reward == 0.0 || t.reward == 1.0);
    ASSERT_EQ(t.reward_components.size(), 1u);
    EXPECT_EQ(t.reward_components[0], (std::pair<std::string, double>{"env.bad_key_status", 401.0}));
    ASSERT_EQ(t.old_logprob.size(), t.tokens.size());
    if (!t.appended.empty()) ++merged;
    std::vector<int32_t> seq = t.prompt;
    seq.insert(seq.end(), t.tokens.begin(), t.tokens.end());
    const int64_t T = static_cast<int64_t>(seq.size());
    std::vector<int32_t> tgt(static_cast<size_t>(T), -1);
    for (int64_t i = 0; i + 1 < T; ++i) tgt[static_cast<size_t>(i)] = seq[static_cast<size_t>(i + 1)];
    std::vector<float> lp(static_cast<size_t>(T)), ent(static_cast<size_t>(T));
    model.forward_logprobs(seq.data(), tgt.data(), 1, T, lp.data(), ent.data());
    std::vector<bool> app(t.tokens.size(), false);
    for (auto [a, n] : t.appended)
      for (int64_t i = a; i < a + n; ++i) app[static_cast<size_t>(i)] = true;
    for (size_t i = 0; i < t.tokens.size(); ++i)
      if (!app[i]) worst = std::max(worst, double(std::fabs(lp[t.prompt.size() - 1 + i] - t.old_logprob[i])));
  }
  std::printf("%zu trajectories from 4 episodes, %d stitched from two calls; largest |rollout - training| %.3g\n",
              traj.size(), merged, worst);
  EXPECT_GE(merged, 1);  // the agent loop's second call extends the first
  EXPECT_LT(worst, 1e-4);
  EXPECT_EQ(pool.free_blocks(), 256);
}
