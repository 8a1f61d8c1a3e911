// A stop asked from outside (SIGINT/SIGTERM through core/stop_signals.h) reaching long loops that
// opted in. request_interrupt() sets a process-wide flag (any thread); a loop calls
// interruption_point() between units of work (the rollout engine: between decode steps), which throws
// Interrupted when a stop was requested and the calling thread holds an InterruptScope that is on.
// Threads without one (a server's engine thread, a data-parallel rank that must stay in step with the
// others) never throw: they finish their work and the caller checks interrupt_requested() itself.
#pragma once

#include <stdexcept>

namespace temper {

class Interrupted : public std::runtime_error {
 public:
  Interrupted() : std::runtime_error("interrupted by a stop request (SIGINT/SIGTERM)") {}
};

void request_interrupt();
bool interrupt_requested();
void clear_interrupt();  // tests

// Arms interruption_point() on this thread for its lifetime (when `on`); nests.
class InterruptScope {
 public:
  explicit InterruptScope(bool on = true);
  ~InterruptScope();
  InterruptScope(const InterruptScope&) = delete;
  InterruptScope& operator=(const InterruptScope&) = delete;

 private:
  bool on_;
};

void interruption_point();

}  // namespace temper
