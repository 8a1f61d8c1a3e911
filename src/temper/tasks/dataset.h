// Task "dataset": problems from JSONL files, one object per line (TRL's formats included): "prompt" (a string, or
// a list of {role, content} turns) or "messages" (a list of turns: system first if any, then user and assistant);
// a final assistant turn is the gold completion, not part of the prompt. Optional: "answer" (string or number;
// GSM8K's "<worked solution>\n#### 72" becomes answer "72" and, without a teacher_response, the teacher_response),
// "solution" or "completion" (the gold completion as text, or TRL's list of one assistant turn), "teacher_response",
// "rubric" (string, or a list of criteria), "difficulty" (integer), "modules" (a list of strings: the atomic skills the
// row uses, for [curriculum]'s coverage), "set" (string: the curriculum set, see train_set), "id" (string or integer;
// default
// "<file name>:<line>"); every column, these and others, reaches reward programs as Problem::row. Completions are
// scored with the math answer checker (reward/math_answer.h); a row without an answer scores 0 (require_answers
// lets a run refuse such rows). Errors name file:line, the field, the expected and the actual.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "temper/tasks/task.h"

namespace temper::tasks {

struct DatasetConfig {
  std::string path;               // train JSONL (required)
  std::string eval_path;          // eval JSONL (optional)
  double eval_fraction = 0;       // without eval_path: share of the train file held out for eval, in [0, 1)
  std::string train_set = "all";  // "all", or the training rows whose `set` is this (and those without one)
  void validate(const std::string& task = "dataset") const;
  static DatasetConfig from_params(const TaskParams& params,
                                   const std::string& task = "dataset");  // keys as the fields
};

// Train and eval problems of a JSONL task (`load` reads one file): eval from cfg.eval_path (a warning when
// prompts appear in both), or the rows of cfg.path whose prompt hashes below eval_fraction (identical prompts
// never straddle the splits; the rest must not be empty), or none. Errors name the task and the file.
void load_splits(const DatasetConfig& cfg, const std::string& task,
                 const std::function<std::vector<Problem>(const std::string&)>& load, std::vector<Problem>& train,
                 std::vector<Problem>& eval);

// Every row of a JSONL file as a Problem (blank lines skipped). gold_solution (SFT's target):
//   - the gold completion (at most one of a final assistant turn, "solution", "completion"), with "\n#### <answer>"
//     appended only when the row has an answer and the checker reads no final answer in the text (no "####",
//     \boxed{} or "the answer is"); it is also the teacher_response when the row gives none;
//   - else teacher_response, with "\n#### <answer>" appended unless it has a "####" line (the rule before gold
//     completions existed, kept bit for bit);
//   - else "#### <answer>"; else (no answer either) empty: SFT refuses the row.
// With messages, `messages` holds the turns before the gold completion and `prompt` (unless given as a string)
// is the content of the last user turn. A row's system turn is sent instead of model.system_prompt (app/codec.h).
std::vector<Problem> load_jsonl_problems(const std::string& path);

// Problems without an answer among a task's `split` (any finite task, a mixture with dataset members too; a
// procedural stream has none): how many, and the first one's id (FILE:LINE unless the row names one).
struct Answerless {
  int64_t count = 0;
  std::string first_id;
};
Answerless find_answerless(const Task& task, Split split);
// For a run whose reward includes the builtin checker: throws when a problem of `splits` has no answer (it would
// score 0 whatever the completion), naming who asks, the count, the first row and both fixes.
void require_answers(const Task& task, const std::string& who,
                     const std::vector<Split>& splits = {Split::train, Split::eval});

// Eval comes from eval_path, or from eval_fraction of the train file (rows chosen by a hash of the
// prompt, so identical prompts never straddle the splits), or is empty (load_splits).
// Curriculum ([curriculum] sets train_set to its sft_set, then its rl_set): train_set other than "all" keeps the
// training rows whose `set` equals it, and those without a `set` (they belong to every set); a set no row names (when
// some rows name one) or no row kept is an error naming the file and the field. module_inventory() is every module the
// file's rows (train and eval, every set) declare; when no row declares any it throws, naming the file and the field
// 'modules' (only the curriculum asks, and it cannot count coverage without them).
class DatasetTask : public Task {
 public:
  explicit DatasetTask(DatasetConfig cfg);
  std::string name() const override { return "dataset"; }
  bool has_answer_lines() const override { return false; }
  bool has_reasoning_states() const override { return false; }
  int64_t size(Split split) const override;
  Problem problem(Split split, uint64_t index) const override;
  Verdict verify(const Problem& p, const std::string& completion) const override;
  std::optional<std::string> extract_answer(const std::string& completion) const override;  // extract_math_answer
  std::vector<std::string> module_inventory() const override;

 private:
  DatasetConfig cfg_;
  std::vector<Problem> train_, eval_;
  std::vector<std::string> inventory_;  // sorted
};

}  // namespace temper::tasks
