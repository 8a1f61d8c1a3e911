// The run's reward: weighted terms from the recipe's [[reward]] tables, each with one source: the task's
// verifier (`builtin`, the default when the recipe gives no [[reward]]), a reward program (worker processes
// speaking JSON lines, reward/program_reward.h), or an LLM judge (rl/judge_reward.h). The total is the weighted
// sum; a term that fails on a sample (a timeout, a crash, a malformed answer, an unparseable judgement) gives
// that sample its `on_failure` value and counts in reward_failures, never stopping the run. The task's verifier
// also decides `correct` (accuracy) unless a term's answer says it. Every term logs reward/<name> per step.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "temper/core/settings.h"
#include "temper/reward/safe_reward.h"
#include "temper/reward/threaded_calls.h"
#include "temper/tasks/task.h"

namespace temper::rl {

enum class JudgeParse { score, choice };
inline constexpr EnumNames<JudgeParse, 2> kJudgeParseNames{{{JudgeParse::score, "score"}, {JudgeParse::choice, "choice"}}};

// judge = { model = PATH, template = "...", parse = "score" | "choice", ... }: a second model that reads a
// prompt made from the template and answers with a score or a label.
struct JudgeConfig {
  std::string model;           // HF directory or GGUF file
  std::string prompt_template;  // key "template": {question}, {completion}, {answer}, {rubric}
  JudgeParse parse = JudgeParse::score;
  double min_score = 0, max_score = 10;  // parse = "score": the range; the reward is (score - min) / (max - min)
  std::vector<std::string> labels;       // parse = "choice": the labels, e.g. "correct,incorrect"
  std::vector<double> label_rewards;     // the reward of each label (default: 1 for the first, 0 for the rest)
  int64_t max_new = 256;
  double temperature = 0;  // 0: greedy (reproducible scores)
  std::string device = "cpu";
  void visit(KeyVisitor& v);
  void validate(const std::string& term) const;
};

enum class RewardSource { builtin, program, judge };

struct RewardTermConfig {
  std::string name;
  double weight = 1;
  bool builtin = false;              // the task's verifier
  std::vector<std::string> program;  // argv of a reward program's worker
  std::optional<JudgeConfig> judge;
  int64_t workers = 1;          // program: worker processes (per rank)
  double timeout_s = 60;        // program: one batch; judge: not used
  double start_timeout_s = 60;  // program: spawn to ready
  double on_failure = 0;        // the term's value for a sample it failed to score
  void visit(KeyVisitor& v);    // every key but the judge's table
  RewardSource source() const;
  void validate() const;  // exactly one source, a name, finite numbers
};

// One completion to score.
struct RewardQuery {
  const tasks::Problem* problem = nullptr;
  const std::string* completion = nullptr;
  std::string id;  // "<step>/<trajectory>", unique within a run
};

struct TermScore {
  double value = 0;
  bool failed = false;
  std::vector<std::pair<std::string, double>> components;
  std::string info;
  std::optional<bool> correct;
};

// One source of reward. score() never throws for a bad sample: failures are TermScore::failed.
class RewardTerm {
 public:
  virtual ~RewardTerm() = default;
  // Before the first step: start workers, load models; throws naming what cannot run.
  virtual void start() {}
  virtual std::vector<TermScore> score(const std::vector<RewardQuery>& qs, int64_t step) = 0;
  virtual int64_t failures() const { return 0; }
};

// The reward of one completion: the task's verdict with `reward` the weighted total (and `correct` a term's when
// one says it), each term's value, the terms' info texts and components (for samples.jsonl).
struct ScoredCompletion {
  tasks::Verdict verdict;
  std::vector<double> terms;
  std::vector<std::pair<std::string, double>> components;  // "<term>.<component>"
  std::string info;
};

using JudgeFactory = std::function<std::unique_ptr<RewardTerm>(const RewardTermConfig&)>;

// Where the task's verifier runs for a batch: on a worker thread of this process (a call past its timeout is
// abandoned with its thread, a fresh one goes on; reward/threaded_calls.h), or in a forked child that is killed at
// the timeout (reward/forked_calls.h; ~30-60 ms a batch for the fork). Thread mode moves to process mode for good,
// with an error in the log, once abandoned calls that never return reach SafeRewardOptions::max_abandoned.
enum class VerifierIsolation { thread, process };
inline constexpr EnumNames<VerifierIsolation, 2> kVerifierIsolationNames{
    {{VerifierIsolation::thread, "thread"}, {VerifierIsolation::process, "process"}}};

class RewardSet {
 public:
  // configs empty: the task's verifier alone (no reward/<name> metrics, the reward exactly the verdict's).
  // `env`: "KEY=value" for reward programs' workers. make_judge builds judge terms (null: a judge is refused).
  RewardSet(std::shared_ptr<const tasks::Task> task, reward::SafeReward& safe,
            std::vector<RewardTermConfig> configs = {}, const JudgeFactory& make_judge = nullptr,
            std::vector<std::string> env = {}, VerifierIsolation isolation = VerifierIsolation::thread);
  void start();  // every term; throws naming the term that cannot run
  std::vector<ScoredCompletion> score(const std::vector<RewardQuery>& qs, int64_t step);
  tasks::Verdict verify(const tasks::Problem& p, const std::string& completion, int64_t step);  // one completion

  const std::vector<RewardTermConfig>& configs() const { return configs_; }
  int64_t failures() const;  // every term's, and the verifier's
  VerifierIsolation isolation() const { return isolation_; }

 private:
  std::vector<tasks::Verdict> verify_batch(const std::vector<RewardQuery>& qs, std::vector<uint8_t>& failed);
  bool verifier_starved();

  std::shared_ptr<const tasks::Task> task_;
  reward::SafeReward& safe_;
  std::vector<RewardTermConfig> configs_;
  std::vector<std::unique_ptr<RewardTerm>> terms_;  // null for builtin terms (the verdict is computed anyway)
  int64_t verify_calls_ = 0;
  VerifierIsolation isolation_;
  reward::ThreadedCalls threaded_;  // thread mode's batches
  int64_t batch_failures_ = 0;      // verifier failures in batches (single calls: SafeReward's)
};

}  // namespace temper::rl
