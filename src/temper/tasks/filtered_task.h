// A task with some problems of its finite splits left out (rows a trainer cannot use: app/input_scan.h skips
// prompts longer than the model's context): the rest renumbered densely, so size(split) counts the kept problems
// and problem(split, i) is the inner task's i-th kept one (its id unchanged); everything else is forwarded.
// Leaves out nothing of a procedural stream (size < 0): there is no end to renumber to, so that is refused.
#pragma once

#include <array>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "temper/tasks/task.h"

namespace temper::tasks {

class FilteredTask final : public Task {
 public:
  // left_out: per split, indices of the inner task's problems to leave out (any order; repeats count once). Throws
  // naming the split and the index when one is past the split's end or the split is a stream.
  FilteredTask(std::shared_ptr<const Task> inner, const std::map<Split, std::vector<uint64_t>>& left_out);

  std::string name() const override { return inner_->name(); }
  int64_t size(Split s) const override;
  Problem problem(Split s, uint64_t index) const override;
  Verdict verify(const Problem& p, const std::string& completion) const override;
  std::optional<std::string> extract_answer(const std::string& completion) const override;
  std::optional<std::string> answer_candidate(const Problem& p, std::string_view partial) const override;
  std::string answer_close() const override { return inner_->answer_close(); }
  bool has_answer_lines() const override { return inner_->has_answer_lines(); }
  bool has_reasoning_states() const override { return inner_->has_reasoning_states(); }
  bool accepts(const Problem& p, const std::string& candidate) const override;
  std::vector<std::string> intermediate_states(const Problem& p, const std::string& completion) const override;
  std::string rubric(const Problem& p) const override { return inner_->rubric(p); }
  std::vector<std::string> reward_names() const override { return inner_->reward_names(); }
  std::vector<std::string> module_inventory() const override { return inner_->module_inventory(); }

  const Task& inner() const { return *inner_; }
  // The inner task's index of kept problem `index` of split s.
  uint64_t inner_index(Split s, uint64_t index) const;
  // How many problems of split s are left out.
  int64_t left_out(Split s) const { return static_cast<int64_t>(gaps_[static_cast<size_t>(s)].size()); }

 private:
  std::shared_ptr<const Task> inner_;
  // Per split, for the k-th left-out inner index s_k (ascending): s_k - k, the kept problems before it
  // (non-decreasing), so kept index i is inner index i + #{k : s_k - k <= i}.
  std::array<std::vector<uint64_t>, 2> gaps_;
  std::array<int64_t, 2> size_{};
};

}  // namespace temper::tasks
