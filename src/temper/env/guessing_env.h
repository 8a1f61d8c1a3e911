// The built-in "guess" environment: a multi-turn guessing game. The user thinks of a secret integer in [1, n]
// (param n, default 100); each assistant turn's last integer is its guess, answered "higher", "lower" or
// "correct" (reward 1, done); a turn without one gets "Please answer with a number.". The secret is the row's
// "secret" when it has one, else drawn from (seed, split, index). On done, component "turns" counts the turns.
// examples/envs/guess_env.py is the same game as an environment program.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

#include "temper/env/environment.h"

namespace temper::env {

struct GuessOptions {
  int64_t n = 100;               // params "n": secrets in [1, n] (2..10^9)
  std::optional<uint64_t> seed;  // params "seed": else the row's "seed", else 0
  static GuessOptions from_params(const nlohmann::ordered_json& params);  // names the bad param
};

int64_t guess_secret(const GuessOptions& opt, uint64_t seed, bool eval, uint64_t index);
std::string guess_prompt(int64_t n);  // "I'm thinking of a number between 1 and N. Guess it; I'll say higher or lower."

class GuessingEnvironment : public Environment {
 public:
  explicit GuessingEnvironment(GuessOptions opt) : opt_(opt) {}
  std::string name() const override { return "guess"; }
  // row: {"index", "split", "seed"} (a drawn secret) or {"secret": s} (s in [1, n]).
  EnvReply reset(const std::string& episode, const nlohmann::ordered_json& row) override;
  EnvReply step(const std::string& episode, const nlohmann::ordered_json& message) override;
  void close(const std::string& episode) override;
  int64_t failures() const override { return failures_.load(); }  // resets refused (a bad row)

 private:
  struct State {
    int64_t secret = 0, turns = 0;
  };
  GuessOptions opt_;
  std::mutex mu_;
  std::unordered_map<std::string, State> episodes_;
  std::atomic<int64_t> failures_{0};
};

}  // namespace temper::env
