#include "temper/model/lr_schedule.h"

#include <cmath>

namespace temper {

double LrSchedule::at(int64_t step) const {
  if (step < warmup_steps) return peak * static_cast<double>(step + 1) / static_cast<double>(warmup_steps + 1);
  if (total_steps <= warmup_steps) return peak;
  double progress = static_cast<double>(step - warmup_steps) / static_cast<double>(total_steps - warmup_steps);
  if (progress > 1.0) progress = 1.0;
  double cosine = 0.5 * (1.0 + std::cos(M_PI * progress));
  return peak * (min_ratio + (1.0 - min_ratio) * cosine);
}

}  // namespace temper
