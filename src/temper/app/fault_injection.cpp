#include "temper/app/fault_injection.h"

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>

#include "temper/core/interrupt.h"

namespace temper::app {

void fault_signal(int64_t step, const char* phase) {
  const char* fault = std::getenv("TEMPER_FAULT_SIGNAL_IN_STEP");
  if (!fault) return;
  const std::string f = fault;
  const size_t colon = f.find(':'), colon2 = f.find(':', colon + 1);
  const std::string want = colon2 == std::string::npos ? "end" : f.substr(colon2 + 1);
  if (colon == std::string::npos || f.substr(0, colon) != std::to_string(step) || want != phase) return;
  kill(getpid(), std::stoi(f.substr(colon + 1, colon2 - colon - 1)));
  for (int i = 0; i < 500 && !interrupt_requested(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
}

std::function<void()> fault_kill_in_checkpoint(int64_t step) {
  const char* kill_at = std::getenv("TEMPER_FAULT_KILL_IN_CHECKPOINT");
  if (!kill_at || std::to_string(step) != kill_at) return {};
  return [] { kill(getpid(), SIGKILL); };
}

}  // namespace temper::app
