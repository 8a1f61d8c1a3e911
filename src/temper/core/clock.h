// Wall-clock intervals on the steady clock, in seconds: step timings and metrics.
#pragma once

#include <chrono>

namespace temper {

using Clock = std::chrono::steady_clock;

inline double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

}  // namespace temper
