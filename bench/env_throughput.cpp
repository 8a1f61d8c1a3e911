// Multi-turn rollout throughput: conversations against an environment whose every step sleeps (a tool call,
// a sandbox, a remote API), through EnvRollout (the engine keeps the other sequences decoding while one waits;
// each sequence's KV cache is kept across turns and only the observation is prefilled), against the same
// conversations with no wait, and against lockstep turns (every turn one batch over all conversations, each
// re-prefilling its whole history, the environment's calls of a turn in parallel between batches: what a loop
// around a one-shot generate does). EnvRollout runs both ways: env.deterministic (each decode step waits for the
// calls the previous one started) and not (answers join as they arrive). Random weights of a preset shape; every
// turn is turn_max_new tokens, or with STOP_EVERY = k > 0 ends early at a token id divisible by k (about 1 in k
// sampled tokens: turns end at different steps, as real ones do).
// Results: docs/PERFORMANCE.md "Multi-turn rollouts".
// Usage: env_throughput [PRESET=quickstart-large] [CONVERSATIONS=32] [TURNS=4] [TURN_TOKENS=32] [SLEEP_MS=50]
//        [STOP_EVERY=0]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "temper/model/config.h"
#include "temper/model/kv_pool.h"
#include "temper/model/transformer.h"
#include "temper/rl/env_rollout.h"

using namespace temper;
using json = nlohmann::ordered_json;

namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// Sleeps `ms` in every step; the observation is 8 tokens; done after `turns` turns.
class SleepyEnv : public env::Environment {
 public:
  SleepyEnv(int ms, int turns) : ms_(ms), turns_(turns) {}
  std::string name() const override { return "sleepy"; }
  env::EnvReply reset(const std::string&, const json& row) override {
    env::EnvReply r;
    r.messages = json::array({{{"role", "user"}, {"content", std::to_string(row.value("index", 0))}}});
    return r;
  }
  env::EnvReply step(const std::string& ep, const json&) override {
    if (ms_ > 0) std::this_thread::sleep_for(std::chrono::milliseconds(ms_));
    std::lock_guard<std::mutex> lk(mu_);
    env::EnvReply r;
    r.done = ++turn_[ep] >= turns_;
    r.messages = json::array({{{"role", "tool"}, {"content", "observation"}}});
    return r;
  }
  int ms_, turns_;
  std::mutex mu_;
  std::map<std::string, int> turn_;
};

std::vector<int32_t> prompt_of(const json& msgs) {
  std::vector<int32_t> v = {1, 2, 3, 4, 5, 6, 7, 8};
  for (const json& m : msgs) v.push_back(10 + std::atoi(m["content"].get<std::string>().c_str()) % 50);
  return v;
}
const std::vector<int32_t> kObservation = {11, 12, 13, 14, 15, 16, 17, 18};

rl::ConversationCodec codec() {
  rl::ConversationCodec c;
  c.encode_start = [](const json& msgs, const json&) { return prompt_of(msgs); };
  c.encode_continuation = [](const json&, const json&) { return kObservation; };
  c.assistant_message = [](const std::vector<int32_t>&) { return json{{"role", "assistant"}, {"content", "x"}}; };
  c.decode = [](const std::vector<int32_t>&) { return std::string(); };
  c.stop_ids = {};
  c.end_of_turn = 2;
  return c;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string preset = argc > 1 ? argv[1] : "quickstart-large";
  const int n = argc > 2 ? std::atoi(argv[2]) : 32, turns = argc > 3 ? std::atoi(argv[3]) : 4;
  const int turn_tokens = argc > 4 ? std::atoi(argv[4]) : 32, sleep_ms = argc > 5 ? std::atoi(argv[5]) : 50;
  const int stop_every = argc > 6 ? std::atoi(argv[6]) : 0;
  ModelConfig cfg = model_config_preset(preset);
  Transformer model(cfg);
  model.init_random(1, 0.02f);
  const int64_t total = static_cast<int64_t>(turns) * (turn_tokens + 9) + 16;
  KvPool pool(cfg, 16, (n * total) / 16 + 2 * n);
  rollout::EngineConfig ec;
  ec.max_seqs = n;
  rollout::RolloutEngine engine(model, pool, ec);
  std::vector<tasks::Problem> problems(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) problems[static_cast<size_t>(i)].index = i;
  rollout::SamplerConfig sc;
  std::set<int32_t> stops;
  for (int32_t t = stop_every; stop_every > 0 && t < cfg.vocab_size; t += stop_every) stops.insert(t);
  rollout::RolloutRequest proto = rollout::make_request({0}, 1, total, cfg.max_position_embeddings, sc, stops, 7, 0);
  std::printf("%s: %d conversations x %d turns x %d tokens, environment step %d ms, %d threads, stop every %d\n",
              preset.c_str(), n, turns, turn_tokens, sleep_ms, n, stop_every);
  struct Mode {
    bool deterministic;
    int64_t answer_steps;
  };
  for (int ms : {0, sleep_ms})
    for (Mode mode : {Mode{true, 1}, Mode{true, 4}, Mode{false, 1}}) {
      SleepyEnv env(ms, turns);
      rl::EnvRolloutConfig rc;
      rc.max_turns = turns;
      rc.turn_max_new = turn_tokens;
      rc.threads = n;
      rc.deterministic = mode.deterministic;
      rc.answer_steps = mode.answer_steps;
      rl::ConversationCodec cc = codec();
      cc.stop_ids = stops;
      rl::EnvRollout er(env, cc, rc);
      const Clock::time_point t0 = Clock::now();
      std::vector<rl::Trajectory> got = er.run(engine, problems, 0, 1, proto, cfg.max_position_embeddings, "b", 0);
      const double s = since(t0);
      int64_t sampled = 0;
      for (const rl::Trajectory& t : got) {
        int64_t app = 0;
        for (auto [a, k] : t.appended) app += k;
        sampled += static_cast<int64_t>(t.tokens.size()) - app;
      }
      const std::string how = mode.deterministic ? "deterministic, answer_steps " + std::to_string(mode.answer_steps)
                                                 : std::string("as they arrive");
      std::printf(
          "EnvRollout (%s), step %3d ms: %.2f s, %lld sampled tokens, %.1f tokens/s, prefill %lld tokens, "
          "%lld steps\n",
          how.c_str(), ms, s, static_cast<long long>(sampled), static_cast<double>(sampled) / s,
          static_cast<long long>(engine.stats().prefill_tokens), static_cast<long long>(engine.stats().steps));
    }
  // Lockstep: one batch per turn, each re-prefilling its history, then one parallel round of environment calls.
  std::vector<std::vector<int32_t>> conv(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) conv[static_cast<size_t>(i)] = prompt_of(json::array({{{"content", std::to_string(i)}}}));
  const Clock::time_point t0 = Clock::now();
  int64_t sampled = 0, prefill = 0;
  for (int k = 0; k < turns; ++k) {
    std::vector<rollout::RolloutRequest> reqs;
    for (int i = 0; i < n; ++i)
      reqs.push_back(rollout::make_request(conv[static_cast<size_t>(i)], 1, turn_tokens, cfg.max_position_embeddings,
                                           sc, {}, 7, static_cast<uint64_t>(i)));
    std::vector<rollout::Completion> out = engine.run(reqs);
    prefill += engine.stats().prefill_tokens;
    for (rollout::Completion& c : out) {
      std::vector<int32_t>& h = conv[static_cast<size_t>(c.request)];
      h.insert(h.end(), c.tokens.begin(), c.tokens.end());
      sampled += static_cast<int64_t>(c.tokens.size());
      if (k + 1 < turns) h.insert(h.end(), kObservation.begin(), kObservation.end());
    }
    if (sleep_ms > 0)
      std::this_thread::sleep_for(std::chrono::milliseconds(sleep_ms));  // the turn's calls, in parallel
  }
  const double s = since(t0);
  std::printf("Lockstep,   step %3d ms: %.2f s, %lld sampled tokens, %.1f tokens/s, prefill %lld tokens\n", sleep_ms, s,
              static_cast<long long>(sampled), static_cast<double>(sampled) / s, static_cast<long long>(prefill));
  return 0;
}
