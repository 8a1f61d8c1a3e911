#include "temper/control/task.h"

#include <cmath>

#include "temper/core/error.h"
#include "temper/core/rng.h"

namespace temper::control {

TaskKind task_kind_from(const std::string& name, const std::string& where) {
  if (name == "velocity") return TaskKind::velocity;
  if (name == "position") return TaskKind::position;
  TEMPER_FAIL() << where << ": task kind '" << name << "' is not one of velocity, position";
}

const char* task_kind_name(TaskKind k) {
  return k == TaskKind::velocity ? "velocity" : "position";
}

void TaskSpec::validate(const std::string& where) const {
  TEMPER_CHECK(modes >= 1 && modes <= 64) << where << ": modes must be in 1..64, got " << modes;
  TEMPER_CHECK(magnitude_lo > 0 && magnitude_hi >= magnitude_lo)
      << where << ": magnitudes must satisfy 0 < magnitude_lo <= magnitude_hi, got " << magnitude_lo << ", "
      << magnitude_hi;
  TEMPER_CHECK(episode_seconds > 0 && episode_seconds <= 600)
      << where << ": episode_seconds must be in (0, 600], got " << episode_seconds;
}

TaskBatch draw_tasks(const TaskSpec& s, uint64_t seed, uint64_t episode, int64_t n) {
  constexpr uint64_t kTaskKey = 0x7461736bull;  // "task": the task draws' own key, apart from action noise
  TaskBatch b;
  b.mode.resize(n);
  b.magnitude.resize(n);
  b.tx.resize(n);
  b.ty.resize(n);
  for (int64_t i = 0; i < n; ++i) {
    Rng rng(mix_seed(seed, kTaskKey), mix_seed(episode, static_cast<uint64_t>(i)));
    int32_t mode = static_cast<int32_t>(rng.next_u32() % static_cast<uint32_t>(s.modes));
    float mag = s.magnitude_lo + (s.magnitude_hi - s.magnitude_lo) * rng.uniform();
    double angle = s.angle0 + 2.0 * M_PI * mode / s.modes;
    b.mode[i] = mode;
    b.magnitude[i] = mag;
    b.tx[i] = mag * static_cast<float>(std::cos(angle));
    b.ty[i] = mag * static_cast<float>(std::sin(angle));
  }
  return b;
}

}  // namespace temper::control
