// Learning-rate schedule: linear warmup, peak * (step + 1) / (warmup + 1) (unlike transformers'
// step / warmup, the first step is not wasted at lr 0), then cosine decay from peak to
// min_ratio * peak at total_steps (transformers' get_cosine_schedule_with_warmup with a floor).
#pragma once

#include <cstdint>

namespace temper {

struct LrSchedule {
  double peak = 1e-3;
  int64_t warmup_steps = 0;
  int64_t total_steps = 0;  // 0: constant after warmup
  double min_ratio = 0.0;
  double at(int64_t step) const;  // step counts from 0
};

}  // namespace temper
