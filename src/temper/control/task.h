// Control tasks (issue 40; spec section 7's CPU miniature): reach or hold a target position or velocity in the
// plane. Per episode and env a latent mode (one of `modes` directions at angle0 + 2*pi*k/modes) and a
// magnitude are drawn; the target is magnitude * direction. The agent never sees them: only the reward
// -|error| tells it. Draws are Philox streams keyed by (seed, episode, env): any env of any episode can be
// redrawn alone. Leaves out: targets that move inside an episode.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace temper::control {

enum class TaskKind { velocity, position };
TaskKind task_kind_from(const std::string& name, const std::string& where);  // "velocity" | "position"
const char* task_kind_name(TaskKind k);

struct TaskSpec {
  TaskKind kind = TaskKind::velocity;
  int modes = 4;              // directions at angle0 + 2*pi*k/modes
  float angle0 = 0.f;         // radians
  float magnitude_lo = 0.5f;  // m/s for velocity tasks, m for position tasks
  float magnitude_hi = 1.5f;
  double episode_seconds = 4.0;  // every body's episode lasts this long (its own number of control steps)
  void validate(const std::string& where) const;
};

struct TaskBatch {  // [N] each
  std::vector<int32_t> mode;
  std::vector<float> magnitude, tx, ty;  // target = magnitude * (cos, sin)(angle of mode)
};

// The tasks of episode `episode` for envs 0..n-1.
TaskBatch draw_tasks(const TaskSpec& s, uint64_t seed, uint64_t episode, int64_t n);

}  // namespace temper::control
