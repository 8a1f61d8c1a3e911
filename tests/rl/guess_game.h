// The guessing game (env/guessing_env.h) as the RL tests' environment on their tiny model (letter_task.h): the
// game, its conversation codec and rollout settings, and a trainer conversing with it (tests/rl/test_async.cpp,
// tests/dist/test_async_mpi.cpp). Leaves out program environments (tests/e2e/env_guess.sh runs one).
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "rl/letter_task.h"
#include "temper/env/guessing_env.h"
#include "temper/rl/env_rollout.h"
#include "temper/rl/rl_trainer.h"

namespace temper::test {

// The guessing game (env/guessing_env.h, secrets in [1, 4]) on the tiny model: a turn's tokens are its digits
// (token t -> t % 10, so every turn names a number; the last one is the guess); the game's messages are two tokens
// each (a user mark and one per reply), so three turns fit the model's 64 positions.
struct GuessGame {
  static constexpr int32_t kStop = 120, kEndOfTurn = 121, kUser = 122;
  static env::GuessOptions options() {
    env::GuessOptions o;
    o.n = 4;
    return o;
  }
  static ConversationCodec codec() {
    ConversationCodec c;
    auto render = [](const nlohmann::ordered_json& msgs) {
      std::vector<int32_t> v;
      for (const auto& m : msgs) {
        const std::string text = m.value("content", std::string());
        v.push_back(kUser);
        v.push_back(text == "higher" ? 123 : text == "lower" ? 124 : text == "correct" ? 125 : 126);
      }
      return v;
    };
    auto digits = [](const std::vector<int32_t>& ids) {
      std::string s;
      for (int32_t t : ids)
        if (t < kStop) s += std::string(s.empty() ? "" : " ") + static_cast<char>('0' + t % 10);
      return s;
    };
    c.encode_start = [render](const nlohmann::ordered_json& msgs, const nlohmann::ordered_json&) {
      return render(msgs);
    };
    c.encode_continuation = c.encode_start;
    c.assistant_message = [digits](const std::vector<int32_t>& turn) {
      return nlohmann::ordered_json{{"role", "assistant"}, {"content", digits(turn)}};
    };
    c.decode = digits;
    c.stop_ids = {kStop};
    c.end_of_turn = kEndOfTurn;
    return c;
  }
  static EnvRolloutConfig rollout() {
    EnvRolloutConfig ec;
    ec.max_turns = 3;
    ec.turn_max_new = 4;
    ec.threads = 2;
    return ec;
  }
  // The RL tests' configuration, with [rl.async] at max_staleness = `staleness` when given, and room for three turns.
  static RlConfig config(std::optional<int64_t> staleness) {
    RlConfig c = test::config();
    if (staleness) {
      c.async = AsyncConfig{};
      c.async->max_staleness = *staleness;
    }
    c.max_new = 20;
    return c;
  }
  // A trainer on `s` conversing with this game.
  std::unique_ptr<RlTrainer> trainer(RlSetup& s, const RlConfig& c) {
    auto t = std::make_unique<RlTrainer>(s.model, s.task, test::codec(), c, s.safe);
    t->set_environment(std::make_unique<EnvRollout>(game, codec(), rollout()));
    return t;
  }
  env::GuessingEnvironment game{options()};
};

}  // namespace temper::test
