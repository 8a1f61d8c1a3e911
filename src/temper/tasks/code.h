// Procedural task "code": write a small Python function (string and list transformations) that hidden unit tests
// check, run in the sandbox (sandbox/python_tests.h). The prompt states the function and shows examples; the
// completion is a ```python fenced block (or bare code); reward = share of tests passed ("fraction") or 1/0 when
// all pass ("all"). Families come in three levels (difficulty): 1 one-liners (reverse, add k, count a char), 2 short
// loops (reverse words, running sum, dedupe, rotate), 3 a little state (run-length, chunk sums, alternate case).
// Problem::answer holds the hidden tests, one assert per line; the gold solution is the fenced reference function.
#pragma once

#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "temper/sandbox/sandbox.h"
#include "temper/tasks/task.h"

namespace temper::tasks {

enum class CodeReward { fraction, all };

struct CodeConfig {
  uint64_t seed = 0;
  int min_level = 1, max_level = 2;   // difficulty levels drawn, 1..3
  std::vector<std::string> families;  // empty: every family of the levels (param: comma list of names)
  int examples = 2;                   // tests shown in the prompt (they are also checked)
  int tests = 4;                      // hidden tests beyond the examples
  int max_len = 6;  // longest input list (strings max_len + 1 letters, (max_len + 2) / 2 words or runs)
  CodeReward reward = CodeReward::fraction;
  sandbox::SandboxLimits limits = [] {
    sandbox::SandboxLimits l;
    l.cpu_s = 1, l.wall_s = 2, l.memory_mb = 256;
    return l;
  }();
  void validate() const;
  static CodeConfig from_params(const TaskParams& params);  // keys as the fields; limits as cpu_s, wall_s, memory_mb
};

class CodeTask : public Task {
 public:
  explicit CodeTask(CodeConfig cfg);  // checks once that the sandbox can be built (throws naming what is missing)
  std::string name() const override { return "code"; }
  bool has_answer_lines() const override { return false; }
  bool has_reasoning_states() const override { return false; }
  int64_t size(Split) const override { return -1; }
  Problem problem(Split split, uint64_t index) const override;
  Verdict verify(const Problem& p, const std::string& completion) const override;
  // The code of the completion: the first ```python (or ```) block, to its closing fence or the end; without a
  // fence, the whole completion.
  std::optional<std::string> extract_answer(const std::string& completion) const override;
  std::optional<std::string> answer_candidate(const Problem&, std::string_view) const override { return std::nullopt; }
  std::string answer_close() const override { return "```python\n"; }
  const CodeConfig& config() const { return cfg_; }

 private:
  CodeConfig cfg_;
  std::vector<int> families_;  // indices into the family table
  // Outcomes by (code, tests): a group's identical completions run once.
  mutable std::mutex cache_mu_;
  mutable std::map<std::string, std::pair<int, int>> cache_;
};

// Every family's name and level (tests and docs).
std::vector<std::pair<std::string, int>> code_families();

}  // namespace temper::tasks
