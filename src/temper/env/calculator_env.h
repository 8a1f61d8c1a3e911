// The built-in "calculator" environment: arithmetic word problems with numbers beyond what a small model adds
// reliably (sums, deposits and withdrawals, crates times items plus loose items; 3-5 operands of 4-7 digits by
// default), and a calculator tool the model calls in its own tool-call format. A turn with tool calls gets one tool
// message per call (the exact int64 result or "error: ..."); a turn whose calls could not be parsed gets a user
// message saying so (reward -malformed_penalty); a turn without tool calls is the final answer: reward 1 when the
// last number in it equals the answer, and the episode is done. The turn cap is the caller's.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "temper/env/environment.h"

namespace temper::env {

struct CalculatorOptions {
  int64_t min_digits = 4, max_digits = 7;      // params "digits": N or [lo, hi] (1..9)
  int64_t min_operands = 3, max_operands = 5;  // params "operands": N or [lo, hi] (2..10)
  std::optional<uint64_t> seed;                // params "seed": else the row's "seed", else 0
  double malformed_penalty = 0;                // params "malformed_penalty" (>= 0): subtracted per malformed turn
  // params "tool": false offers no calculator (the no-tool baseline: the model must do the arithmetic itself;
  // a tool call is answered with an error and the episode goes on).
  bool tool = true;
  static CalculatorOptions from_params(const nlohmann::ordered_json& params);  // names the bad param
};

struct CalculatorProblem {
  std::string kind;      // "sum", "balance" or "product"
  std::string question;  // the user message
  int64_t answer = 0;
};
// Deterministic in (options, seed, split, index): Philox stream 2 * index + (eval ? 1 : 0) under a seed mixed from
// `seed` and the family.
CalculatorProblem calculator_problem(const CalculatorOptions& opt, uint64_t seed, bool eval, uint64_t index);

// Evaluates an integer expression: + - * / (exact division only), unary signs, parentheses, spaces; int64 with
// overflow checks. Errors are text for the model ("division by zero", "overflow", "unexpected 'x' at 4").
struct CalcResult {
  bool ok = false;
  int64_t value = 0;
  std::string error;
};
CalcResult calculator_evaluate(std::string_view expression);

nlohmann::ordered_json calculator_tool_schema();  // {"type": "function", "function": {"name": "calculator", ...}}
extern const char* const kCalculatorSystemPrompt;
extern const char* const kCalculatorNoToolPrompt;  // tool = false

class CalculatorEnvironment : public Environment {
 public:
  explicit CalculatorEnvironment(CalculatorOptions opt) : opt_(opt) {}
  std::string name() const override { return "calculator"; }
  // row: {"index", "split", "seed"} (a generated problem) or {"question", "answer"} (your own).
  EnvReply reset(const std::string& episode, const nlohmann::ordered_json& row) override;
  EnvReply step(const std::string& episode, const nlohmann::ordered_json& message) override;
  void close(const std::string& episode) override;
  int64_t failures() const override { return failures_.load(); }  // resets refused (a bad row)

 private:
  struct State {
    int64_t answer = 0;
    int64_t turns = 0, tool_calls = 0, tool_errors = 0, malformed = 0;
  };
  CalculatorOptions opt_;
  std::mutex mu_;
  std::unordered_map<std::string, State> episodes_;
  std::atomic<int64_t> failures_{0};
};

}  // namespace temper::env
