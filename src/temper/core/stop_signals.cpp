#include "temper/core/stop_signals.h"

#include <pthread.h>
#include <signal.h>

#include <cstring>

#include "temper/core/error.h"
#include "temper/core/log.h"

namespace temper {

namespace {

sigset_t stop_set() {
  sigset_t s;
  sigemptyset(&s);
  sigaddset(&s, SIGINT);
  sigaddset(&s, SIGTERM);
  return s;
}

}  // namespace

void StopSignals::start(std::function<void(int)> on_signal, std::function<void(int)> on_repeat) {
  TEMPER_CHECK(!thread_.joinable()) << "StopSignals::start: already started";
  sigset_t s = stop_set();
  const int rc = pthread_sigmask(SIG_BLOCK, &s, nullptr);
  TEMPER_CHECK(rc == 0) << "StopSignals::start: pthread_sigmask failed: " << std::strerror(rc);
  on_signal_ = std::move(on_signal);
  on_repeat_ = std::move(on_repeat);
  stopping_ = false;
  thread_ = std::thread([this] { wait_loop(); });
}

void StopSignals::wait_loop() {
  const sigset_t s = stop_set();
  for (;;) {
    int sig = 0;
    if (sigwait(&s, &sig) != 0) continue;
    if (stopping_.load()) return;  // stop() woke us
    int expected = 0;
    if (received_.compare_exchange_strong(expected, sig)) {
      if (on_signal_) on_signal_(sig);
      continue;
    }
    if (on_repeat_) {
      on_repeat_(sig);
      continue;
    }
    // A second signal: the default action (termination), as if nothing had caught the first.
    TEMPER_LOG(warn) << "second " << (sig == SIGINT ? "SIGINT" : "SIGTERM") << ": exiting now";
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    sigaction(sig, &dfl, nullptr);
    sigset_t one;
    sigemptyset(&one);
    sigaddset(&one, sig);
    pthread_sigmask(SIG_UNBLOCK, &one, nullptr);
    raise(sig);
    return;
  }
}

void StopSignals::stop() {
  if (!thread_.joinable()) return;
  stopping_ = true;
  pthread_kill(thread_.native_handle(), SIGTERM);  // blocked there: sigwait takes it and sees stopping_
  thread_.join();
}

}  // namespace temper
