#include "temper/tasks/mixture.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>

#include "temper/core/error.h"
#include "temper/core/settings.h"

namespace temper::tasks {
MixtureTask::MixtureTask(const TaskParams& params) {
  TaskParams own;
  std::map<std::string, TaskParams> sub;
  for (const auto& [k, v] : params) {
    size_t dot = k.find('.');
    if (dot == std::string::npos)
      own[k] = v;
    else
      sub[k.substr(0, dot)][k.substr(dot + 1)] = v;
  }
  ParamReader r("mixture", own);
  seed_ = r.get_seed("seed", 0);
  std::string list = r.get_string("tasks", "");
  std::string weights = r.get_string("weights", "");
  r.finish();
  names_ = split_words(list);
  if (names_.empty()) r.fail("tasks", "a comma list of task names (e.g. \"arithmetic,constraints\")");
  for (size_t i = 0; i < names_.size(); ++i) {
    if (names_[i] == "mixture") r.fail("tasks", "tasks other than mixture itself");
    if (std::find(names_.begin(), names_.begin() + static_cast<long>(i), names_[i]) !=
        names_.begin() + static_cast<long>(i))
      r.fail("tasks", "distinct task names");
  }
  for (const auto& [name, p] : sub)
    if (std::find(names_.begin(), names_.end(), name) == names_.end())
      r.fail(name + "." + p.begin()->first, "a parameter of a listed task (" + list + ")");
  for (const std::string& n : names_) tasks_.push_back(make_task(n, sub[n]));
  std::vector<double> w(names_.size(), 1.0);
  if (!weights.empty()) {
    std::vector<std::string> ws = split_words(weights);
    if (ws.size() != names_.size())
      r.fail("weights", std::to_string(names_.size()) + " positive numbers, one per task");
    for (size_t i = 0; i < ws.size(); ++i) {
      char* end = nullptr;
      w[i] = std::strtod(ws[i].c_str(), &end);
      if (end != ws[i].c_str() + ws[i].size() || !(w[i] > 0) || !std::isfinite(w[i]))
        r.fail("weights", std::to_string(names_.size()) + " positive numbers, one per task");
    }
  }
  double total = 0;
  for (double x : w) total += x;
  double acc = 0;
  for (double x : w) cumulative_.push_back(acc += x / total);
  cumulative_.back() = 1.0;
}

int64_t MixtureTask::size(Split s) const {
  int64_t n = 0;
  for (const auto& t : tasks_) {
    int64_t k = t->size(s);
    if (k < 0) return -1;
    n += k;
  }
  return n;
}

Problem MixtureTask::problem(Split split, uint64_t index) const {
  size_t m = 0;
  uint64_t at = index;
  if (int64_t total = size(split); total > 0) {  // all members finite: each problem once per pass, in member order
    at = index % static_cast<uint64_t>(total);
    while (at >= static_cast<uint64_t>(tasks_[m]->size(split))) at -= static_cast<uint64_t>(tasks_[m++]->size(split));
  } else {  // a member by weight, at the member's own index
    Rng rng = problem_rng("mixture", seed_, split, index);
    const double u = rng.uniform_f64();
    while (m + 1 < cumulative_.size() && u >= cumulative_[m]) ++m;
    int64_t n = tasks_[m]->size(split);
    TEMPER_CHECK(n != 0) << "task 'mixture': member '" << names_[m] << "' has no " << split_name(split) << " problems";
    if (n > 0) at = index % static_cast<uint64_t>(n);
  }
  Problem p = tasks_[m]->problem(split, at);
  p.id = names_[m] + ":" + p.id;
  return p;
}

const Task& MixtureTask::member_of(const Problem& p) const {
  size_t colon = p.id.find(':');
  if (colon != std::string::npos) {
    std::string name = p.id.substr(0, colon);
    for (size_t i = 0; i < names_.size(); ++i)
      if (names_[i] == name) return *tasks_[i];
  }
  TEMPER_FAIL() << "task 'mixture': problem id '" << p.id << "' names none of its tasks (" << names_.size() << ")";
}

Verdict MixtureTask::verify(const Problem& p, const std::string& completion) const {
  return member_of(p).verify(p, completion);
}

std::optional<std::string> MixtureTask::answer_candidate(const Problem& p, std::string_view partial) const {
  return member_of(p).answer_candidate(p, partial);
}

bool MixtureTask::accepts(const Problem& p, const std::string& candidate) const {
  return member_of(p).accepts(p, candidate);
}

std::vector<std::string> MixtureTask::intermediate_states(const Problem& p, const std::string& completion) const {
  return member_of(p).intermediate_states(p, completion);
}

bool MixtureTask::has_answer_lines() const {
  for (const auto& t : tasks_)
    if (!t->has_answer_lines()) return false;
  return true;
}

bool MixtureTask::has_reasoning_states() const {
  for (const auto& t : tasks_)
    if (!t->has_reasoning_states()) return false;
  return true;
}

}  // namespace temper::tasks
