#include "temper/core/interrupt.h"

#include <atomic>

namespace temper {

namespace {
std::atomic<bool> g_requested{false};
thread_local int t_armed = 0;
}  // namespace

void request_interrupt() { g_requested.store(true); }
bool interrupt_requested() { return g_requested.load(std::memory_order_relaxed); }
void clear_interrupt() { g_requested.store(false); }

InterruptScope::InterruptScope(bool on) : on_(on) {
  if (on_) ++t_armed;
}
InterruptScope::~InterruptScope() {
  if (on_) --t_armed;
}

void interruption_point() {
  if (t_armed > 0 && interrupt_requested()) throw Interrupted();
}

}  // namespace temper
