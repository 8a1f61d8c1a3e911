// Task "dataset": problems from JSONL files, one object per line: "prompt" (string) or "messages" (list of
// {role, content}), "answer" (string or number; GSM8K's "<worked solution>\n#### 72" becomes answer "72" and,
// without a teacher_response, the teacher_response), optional "teacher_response", "rubric" (string, or any JSON
// kept as its text), "difficulty" (integer), "id" (string or integer; default "<file name>:<line>"); other fields
// are ignored. Completions are scored with the math answer checker (reward/math_answer.h). Errors name
// file:line, the field, the expected and the actual.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "temper/tasks/task.h"

namespace temper::tasks {

struct DatasetConfig {
  std::string path;          // train JSONL (required)
  std::string eval_path;     // eval JSONL (optional)
  double eval_fraction = 0;  // without eval_path: share of the train file held out for eval, in [0, 1)
  void validate(const std::string& task = "dataset") const;
  static DatasetConfig from_params(const TaskParams& params, const std::string& task = "dataset");  // keys as the fields
};

// Train and eval problems of a JSONL task (`load` reads one file): eval from cfg.eval_path (a warning when
// prompts appear in both), or the rows of cfg.path whose prompt hashes below eval_fraction (identical prompts
// never straddle the splits; the rest must not be empty), or none. Errors name the task and the file.
void load_splits(const DatasetConfig& cfg, const std::string& task, const std::function<std::vector<Problem>(const std::string&)>& load,
                 std::vector<Problem>& train, std::vector<Problem>& eval);

// Every row of a JSONL file as a Problem (blank lines skipped). gold_solution: teacher_response if it already
// ends in a "#### " line, else teacher_response + "\n#### <answer>", else "#### <answer>". When only messages are
// given, prompt is the content of the last "user" message.
std::vector<Problem> load_jsonl_problems(const std::string& path);

// Eval comes from eval_path, or from eval_fraction of the train file (rows chosen by a hash of the
// prompt, so identical prompts never straddle the splits), or is empty (load_splits).
class DatasetTask : public Task {
 public:
  explicit DatasetTask(DatasetConfig cfg);
  std::string name() const override { return "dataset"; }
  int64_t size(Split split) const override;
  Problem problem(Split split, uint64_t index) const override;
  Verdict verify(const Problem& p, const std::string& completion) const override;
  std::optional<std::string> extract_answer(const std::string& completion) const override;  // extract_math_answer

 private:
  DatasetConfig cfg_;
  std::vector<Problem> train_, eval_;
};

}  // namespace temper::tasks
