// The FAIR tests' two-objective task: the prompt "abc" for every problem; a completion starting with 'a' pays the
// first objective only, one starting with 'b' the second only (the convex coverage set {(1,0), (0,1)}: rewards that
// vary within a group and no answer good for both).
#pragma once

#include <string>

#include "temper/tasks/task.h"

namespace temper::test {

class TwoAnswerTask : public tasks::Task {
 public:
  std::string name() const override { return "two_answers"; }
  int64_t size(tasks::Split) const override { return -1; }
  tasks::Problem problem(tasks::Split, uint64_t i) const override {
    tasks::Problem p;
    p.id = std::to_string(i);
    p.prompt = "abc";
    return p;
  }
  tasks::Verdict verify(const tasks::Problem&, const std::string& c) const override {
    tasks::Verdict v;
    v.rewards = {!c.empty() && c[0] == 'a' ? 1.0 : 0.0, !c.empty() && c[0] == 'b' ? 1.0 : 0.0};
    return v;
  }
};

}  // namespace temper::test
