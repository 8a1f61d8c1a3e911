// SIGINT and SIGTERM as an ordinary event: start() blocks both in the calling thread (and so in every
// thread it creates afterwards: call it before any thread exists) and waits for them on a dedicated
// thread with sigwait(); the first one invokes the callback there, once (no async-signal-safety limits
// on it). A second signal while the program winds down restores the default action and re-raises it
// (the usual "press Ctrl-C twice"), unless `on_repeat` is given: then it is called instead (a trainer
// that must finish its checkpoint whatever burst of signals arrives). stop() (or the destructor) ends the
// waiting thread.
// Leaves out: other signals, SIGPIPE (blocked separately by whoever writes sockets).
#pragma once

#include <atomic>
#include <functional>
#include <thread>

namespace temper {

class StopSignals {
 public:
  StopSignals() = default;
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;
  ~StopSignals() { stop(); }

  // Throws temper::Error when called twice without stop() or when the signal mask cannot be set.
  void start(std::function<void(int signal)> on_signal, std::function<void(int signal)> on_repeat = {});
  // Ends the waiting thread (joins it); the signals stay blocked. Safe to call twice.
  void stop();
  // The signal that arrived first (0: none yet).
  int received() const { return received_.load(); }

 private:
  void wait_loop();
  std::function<void(int)> on_signal_, on_repeat_;
  std::thread thread_;
  std::atomic<bool> stopping_{false};
  std::atomic<int> received_{0};
};

}  // namespace temper
