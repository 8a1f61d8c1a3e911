// Task "episodes": a stream of problem indices for environments that draw their own problems ([env] with
// a built-in such as calculator or guess): problem (split, i) is {"index": i, "split": ...}, with no
// prompt of its own; the environment's reset writes the first messages and its steps score the episode.
// verify() is never called on conversations (the environment scores them) and scores 0.
#pragma once

#include "temper/tasks/task.h"

namespace temper::tasks {

class EpisodesTask : public Task {
 public:
  explicit EpisodesTask(const TaskParams& params);
  std::string name() const override { return "episodes"; }
  bool has_answer_lines() const override { return false; }
  bool has_reasoning_states() const override { return false; }
  int64_t size(Split) const override { return -1; }
  Problem problem(Split split, uint64_t index) const override;
  Verdict verify(const Problem&, const std::string&) const override { return {}; }
};

}  // namespace temper::tasks
