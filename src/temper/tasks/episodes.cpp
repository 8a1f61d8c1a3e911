#include "temper/tasks/episodes.h"

namespace temper::tasks {

EpisodesTask::EpisodesTask(const TaskParams& params) {
  ParamReader r("episodes", params);
  r.finish();  // no parameters: the environment has its own ([env.params])
}

Problem EpisodesTask::problem(Split split, uint64_t index) const {
  Problem p;
  p.id = problem_id("episodes", split, index);
  p.index = static_cast<int64_t>(index);
  return p;
}

}  // namespace temper::tasks
