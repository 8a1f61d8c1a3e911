// Task "mixture": several tasks as one (multi-task SFT and RL), e.g. [task] name = "mixture" with
// [task.params] tasks = "arithmetic,constraints", weights = "3,1", and each member's parameters under its
// name ("arithmetic.max_ops" = "3"). Each problem comes from one member and its id is prefixed
// "<member>:", so verification goes to the member that made it (how members are chosen: above MixtureTask).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "temper/tasks/task.h"

namespace temper::tasks {

// Problem (split, index) comes from one member, chosen by a hash of (seed, split, index) with the
// weights, at the member's own index (when every member is finite, e.g. datasets, the indices run
// through the members in order instead, each problem once per pass, and the weights are not used); its
// id is prefixed "<member>:" so that verification (and every per-problem rule: answer detector, close,
// intermediate states) goes to the member that made it, also for prompts a method derives from it
// (which keep the id).
class MixtureTask : public Task {
 public:
  explicit MixtureTask(const TaskParams& params);
  std::string name() const override { return "mixture"; }
  int64_t size(Split s) const override;
  Problem problem(Split split, uint64_t index) const override;
  Verdict verify(const Problem& p, const std::string& completion) const override;
  std::optional<std::string> answer_candidate(const Problem& p, std::string_view partial) const override;
  bool accepts(const Problem& p, const std::string& candidate) const override;
  std::vector<std::string> intermediate_states(const Problem& p, const std::string& completion) const override;
  bool has_answer_lines() const override;      // every member's
  bool has_reasoning_states() const override;  // every member's
  const std::vector<std::string>& members() const { return names_; }
  // The member that made p (by its id prefix); throws naming the id when none did.
  const Task& member_of(const Problem& p) const;

 private:
  std::vector<std::string> names_;
  std::vector<std::unique_ptr<Task>> tasks_;
  std::vector<double> cumulative_;  // normalised cumulative weights
  uint64_t seed_ = 0;
};

}  // namespace temper::tasks
