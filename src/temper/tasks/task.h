// Task: where RL prompts come from and how completions are scored. A task hands out problems by (split, index),
// deterministically from its seed, scores a completion (Verdict) and, for graph methods, lists the reasoning
// states a completion passes through. Completion format everywhere: reasoning lines, then "#### <answer>".
// Also here: the registry (make_task), recipe parameter parsing with errors that name the parameter, and the
// shared rules of procedural families (train/eval split by a hash of the canonical problem, Philox streams).
// Leaves out tokenisation and chat templates (text/) and sampling (rl/).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "temper/core/rng.h"

namespace temper::reward {
class SafeReward;
}

namespace temper::tasks {

enum class Split { train, eval };
const char* split_name(Split s);

struct Message {
  std::string role, content;
};

struct Problem {
  std::string id;                 // stable id, e.g. "arithmetic/train/17"
  std::string prompt;             // the question as plain text
  std::vector<Message> messages;  // optional chat form; empty: use prompt
  std::string answer;             // canonical final answer
  std::string gold_solution;      // step-by-step solution, ends with the final line "#### <answer>"
  std::string teacher_response;   // optional (datasets)
  std::string rubric;             // optional (datasets)
  int difficulty = 0;
  int64_t index = -1;  // the train index the trainer drew it at; -1: built by a method (ZPPO, REVES)
  // Set by methods that build a prompt around the question (rl/derived_problem.h: ZPPO's candidate questions,
  // REVES's revisions, RCSD's rubric teacher, fair RL's preference): the user turn exactly as the model is
  // asked it (model.user_template already applied inside). Empty: the codec phrases `prompt`. `prompt`
  // stays the plain question, so checkers that read it (countdown, rubric_proxy) see the question.
  std::string asked;
  std::vector<std::string> modules;  // compositional families: the atomic modules it uses (curriculum coverage)
  // User simulators (task user_sim): who the user is, their earlier turns and the conversation so far,
  // as text; the real next user turn is `answer`.
  std::string user;
  std::vector<std::string> history;
  std::string context;
  // Datasets: the row as given (a JSON object's text), for reward programs and judges that read its other
  // columns; null for procedural families. Shared: problems are copied often.
  std::shared_ptr<const std::string> row;

  // What the model was given as the question's text, for reports: the method-built text, else the question.
  const std::string& shown() const { return asked.empty() ? prompt : asked; }
};

struct Verdict {
  double reward = 0;
  bool correct = false;
  std::optional<std::string> extracted;  // the final answer read from the completion, if any
  std::vector<double> rewards;           // reward vector, may be empty
};

class Task {
 public:
  virtual ~Task() = default;
  virtual std::string name() const = 0;
  virtual int64_t size(Split) const = 0;                     // -1: unbounded procedural stream
  virtual Problem problem(Split, uint64_t index) const = 0;  // deterministic in (seed, split, index)
  virtual Verdict verify(const Problem&, const std::string& completion) const = 0;
  // Default: the text after the last "####" (reward::extract_gsm8k).
  virtual std::optional<std::string> extract_answer(const std::string& completion) const;
  // Answer detector (rollout editing, DRE): the answer that a partial completion ending at a step boundary (a
  // complete reasoning line, text ends with '\n') states in that last line, or nullopt. Default: the text after
  // the line's last '=' (trimmed, 1-64 bytes: "7*3=21" -> "21", "rev=cba" -> "cba"), while the answer line
  // ("####") has not started.
  virtual std::optional<std::string> answer_candidate(const Problem&, std::string_view partial) const;
  // The text that closes the reasoning and opens the answer line, after which the answer follows.
  virtual std::string answer_close() const { return "#### "; }
  // Whether `candidate` (as answer_candidate gives it) is the problem's answer. Default: verify(close + candidate).
  virtual bool accepts(const Problem& p, const std::string& candidate) const;
  // Canonical strings of the reasoning states the completion passes through, in order (for graph methods that
  // merge equivalent states). Default: none.
  virtual std::vector<std::string> intermediate_states(const Problem&, const std::string& completion) const;
  // Whether answer_candidate reads an answer off a reasoning line (DRE's `task` detector); false for families whose
  // completions follow no answer convention the base rule reads (free text, code, conversations).
  virtual bool has_answer_lines() const { return true; }
  // Whether intermediate_states reports the states a completion passes through (GraphPO's state equivalence).
  virtual bool has_reasoning_states() const { return true; }
  // The rubric of a problem (criteria a strong answer meets, one per line): the dataset's `rubric` field
  // by default; procedural families may generate one. Empty: none.
  virtual std::string rubric(const Problem& p) const { return p.rubric; }
  // The names of the entries of Verdict::rewards, in order (objectives refer to them as task:NAME or task:K); empty
  // for a task without a reward vector.
  virtual std::vector<std::string> reward_names() const { return {}; }
  // Compositional families: every atomic module a problem may use (Problem::modules names them); empty otherwise.
  virtual std::vector<std::string> module_inventory() const { return {}; }
};

using TaskParams = std::map<std::string, std::string>;  // from the TOML recipe, values as text

// Registry: "arithmetic", "countdown", "string_ops", "dataset", "episodes", "constraints", "mixture", "compose",
// "rubric_proxy", "user_sim", "code". Unknown name or parameter, or a bad value -> temper::Error naming the parameter,
// the expected form and the value.
std::unique_ptr<Task> make_task(const std::string& name, const TaskParams& params);
std::vector<std::string> task_names();

// Verify through a SafeReward: an exception or a timeout scores Verdict{} (reward 0). The closure owns copies of
// the problem and completion and a reference on the task, so an abandoned (timed-out) call stays valid.
Verdict verify_safely(reward::SafeReward& safe, std::shared_ptr<const Task> task, const Problem& problem,
                      const std::string& completion);

// ---- Parameters ----------------------------------------------------------------------------------------------

// Reads typed parameters of one task and remembers which were read; finish() rejects the rest as unknown.
class ParamReader {
 public:
  ParamReader(std::string task, const TaskParams& params) : task_(std::move(task)), params_(params) {}
  int64_t get_int(const std::string& key, int64_t def, int64_t lo, int64_t hi);
  uint64_t get_seed(const std::string& key, uint64_t def);
  double get_double(const std::string& key, double def, double lo, double hi);
  std::string get_string(const std::string& key, const std::string& def);
  std::optional<std::string> get_optional(const std::string& key);
  bool has(const std::string& key) const { return params_.count(key) != 0; }
  void finish() const;  // throws naming the first parameter nobody read, and the known ones
  [[noreturn]] void fail(const std::string& key, const std::string& expected) const;

 private:
  std::string task_;
  const TaskParams& params_;
  std::set<std::string> known_;
};

// ---- Shared rules of procedural families -------------------------------------------------------------------

// FNV-1a 64 with a splitmix64 finaliser: stable across platforms and runs.
uint64_t stable_hash(std::string_view s);
// A canonical problem string belongs to eval iff stable_hash % 10 == 0 (10%), so train and eval never share
// a problem whatever the seed or the difficulty ranges.
Split split_of(std::string_view canonical);
// Uniform integer in [lo, hi] (rejection sampling: unbiased).
int64_t rand_int(Rng& rng, int64_t lo, int64_t hi);
// The Philox stream a procedural family draws problem (split, index) from: key = mix(seed, family),
// stream = 2 * index + split; rejected candidates continue along the same stream.
Rng problem_rng(std::string_view family, uint64_t seed, Split split, uint64_t index);
std::string problem_id(std::string_view family, Split split, uint64_t index);
// Lines of a completion up to (not including) the first line that starts with "####".
std::vector<std::string_view> reasoning_lines(std::string_view completion);
// "-12" / "+7" / "33" (surrounding spaces allowed) -> value; nullopt otherwise or on overflow.
std::optional<int64_t> parse_int(std::string_view s);
// a op b for op in + - * / with exact integer semantics: nullopt on overflow, division by zero, an
// inexact quotient, an unknown op, or |result| > max_abs.
std::optional<int64_t> exact_int_op(int64_t a, char op, int64_t b, int64_t max_abs);
// The characters of s, each once, in first-seen order ("++-" -> "+-": a repeat must not bias a draw).
std::string unique_chars(std::string_view s);

constexpr int kMaxGenerateAttempts = 100000;

}  // namespace temper::tasks
