#include "temper/tasks/filtered_task.h"

#include <algorithm>

#include "temper/core/error.h"

namespace temper::tasks {

FilteredTask::FilteredTask(std::shared_ptr<const Task> inner, const std::map<Split, std::vector<uint64_t>>& left_out)
    : inner_(std::move(inner)) {
  TEMPER_CHECK(inner_) << "FilteredTask: no task to filter";
  for (Split s : {Split::train, Split::eval}) {
    const size_t k = static_cast<size_t>(s);
    size_[k] = inner_->size(s);
    auto it = left_out.find(s);
    if (it == left_out.end() || it->second.empty()) continue;
    std::vector<uint64_t> out = it->second;
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    TEMPER_CHECK(size_[k] >= 0) << "task '" << inner_->name() << "': the " << split_name(s)
                                << " split is a procedural stream; no problem can be left out of it";
    TEMPER_CHECK(out.back() < static_cast<uint64_t>(size_[k]))
        << "task '" << inner_->name() << "': cannot leave out " << split_name(s) << " problem " << out.back()
        << ": the split has " << size_[k];
    for (size_t j = 0; j < out.size(); ++j) out[j] -= j;
    gaps_[k] = std::move(out);
    size_[k] -= static_cast<int64_t>(gaps_[k].size());
  }
}

int64_t FilteredTask::size(Split s) const {
  return size_[static_cast<size_t>(s)];
}

uint64_t FilteredTask::inner_index(Split s, uint64_t index) const {
  const std::vector<uint64_t>& g = gaps_[static_cast<size_t>(s)];
  return index + static_cast<uint64_t>(std::upper_bound(g.begin(), g.end(), index) - g.begin());
}

Problem FilteredTask::problem(Split s, uint64_t index) const {
  const int64_t n = size(s);
  TEMPER_CHECK(n < 0 || index < static_cast<uint64_t>(n))
      << "task '" << inner_->name() << "': " << split_name(s) << " problem " << index << " asked of " << n
      << " kept problems";
  return inner_->problem(s, inner_index(s, index));
}

Verdict FilteredTask::verify(const Problem& p, const std::string& completion) const {
  return inner_->verify(p, completion);
}

std::optional<std::string> FilteredTask::extract_answer(const std::string& completion) const {
  return inner_->extract_answer(completion);
}

std::optional<std::string> FilteredTask::answer_candidate(const Problem& p, std::string_view partial) const {
  return inner_->answer_candidate(p, partial);
}

bool FilteredTask::accepts(const Problem& p, const std::string& candidate) const {
  return inner_->accepts(p, candidate);
}

std::vector<std::string> FilteredTask::intermediate_states(const Problem& p, const std::string& completion) const {
  return inner_->intermediate_states(p, completion);
}

}  // namespace temper::tasks
