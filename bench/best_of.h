// The benches' timer: f once untimed (caches, lazy allocation), then the fastest of `reps` timed calls, in seconds.
#pragma once

#include <algorithm>
#include <chrono>

namespace temper::bench {

double best_of(int reps, const auto& f) {
  f();
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    f();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return best;
}

}  // namespace temper::bench
