// Spotlight's explorer processes, seen from the trainer: each is a fresh program (posix_spawn of the explorer
// command: exec, not a bare fork of a process that holds threads and OpenMP/BLAS pools) joined to the trainer by
// one Unix socket (its fd 3, "--fd 3" appended to the command). One I/O thread polls every socket: it sends the
// setup and the explorers' weights version (from memory: no checkpoint is read), answers pulls from the work
// queue, commits results as they arrive, and on end of stream (an explorer killed, even mid-frame) reaps the
// process and hands its request back to the queue (re-queued up to the WorkQueue's tries). Explorers can be added at
// any time (they get the weights the others have), killed (tests, preemption at random intervals) and replaced after
// a delay (and a growing pause after explorers that die setting up).
// Join time = spawn to the explorer's first pull (setup and weights loaded: ready to accept work).
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "temper/spotlight/wire.h"
#include "temper/spotlight/work_queue.h"

namespace temper::spotlight {

struct ExplorerCommand {
  std::vector<std::string> argv;  // the program and its arguments ("--fd 3" is appended)
  Message setup;                  // the first message every explorer gets
};

struct ExplorerJoin {
  int worker = -1;
  double spawned = 0, ready = -1, first_result = -1;  // queue-clock seconds (-1: not yet)
};

struct PoolStats {
  int64_t spawned = 0, deaths = 0, killed = 0;
  int64_t failed_starts = 0;    // deaths before the first pull, not killed by the pool (failed to set up)
  double explorer_seconds = 0;  // the explorers' own time on committed and late results
  double lost_seconds = 0;      // time dead explorers had spent on the request they held
  std::vector<ExplorerJoin> joins;
};

class ExplorerPool {
 public:
  ExplorerPool(WorkQueue& queue, ExplorerCommand cmd);
  ~ExplorerPool();
  ExplorerPool(const ExplorerPool&) = delete;
  ExplorerPool& operator=(const ExplorerPool&) = delete;

  int spawn();  // starts one explorer; returns its worker id
  // Also accept explorers connecting over TCP on "HOST:PORT" ([rl.async]'s `temper train --connect`): each is a worker
  // like a spawned one, admitted once its hello carries `token` (empty: any); a dead one is not replaced (its machine
  // reconnects). Returns the bound port.
  int listen(const std::string& address, std::string token);
  bool listening() const { return listen_fd_ >= 0; }
  // The version explorers compute with (a copy); sent to every explorer now and to each one that joins later.
  void set_weights(int64_t version, std::span<const float> params);
  int64_t weights_version() const;
  // New requests are on the queue: hand them out now (rather than at the I/O thread's next 5 ms tick).
  void notify() { wake(); }
  bool kill(int worker, int sig);
  // SIGKILLs an explorer that holds a request (waiting up to wait_s for one to hold one): its id, or -1.
  int kill_busy(double wait_s);
  // After an explorer dies (not at stop), start a replacement delay_s later.
  void set_respawn(bool on, double delay_s);
  // SIGKILL a random explorer at exponential intervals of mean mean_s (0: off), from Philox stream (seed).
  void set_preemption(double mean_s, uint64_t seed);
  int alive() const;
  int alive_or_coming() const;  // alive, or a replacement due (set_respawn), or any that may connect (listen)
  int ready() const;            // alive and set up (pulled once)
  // Explorers that died setting up (not killed by the pool) since one was last set up.
  int64_t failed_starts_in_row() const;
  PoolStats stats() const;
  // Stop messages, up to 2 s for the explorers to exit, then SIGKILL; joins the I/O thread. Idempotent.
  void stop();

 private:
  struct Worker;
  int spawn_locked();
  void accept_remote();
  // Under the lock: `w` joins (its id and join record; the setup and the current version if admitted); its id.
  int add_worker(std::unique_ptr<Worker> w);
  void send_setup(Worker& w);            // the setup and the current version (on joining, or once its token is checked)
  void kill_worker(Worker& w, int sig);  // a signal to a spawned one, the socket shut on a remote one
  void loop();
  void wake();
  void step_io(std::vector<int>& dead);
  void handle(Worker& w, Message m);
  void feed_work();
  void flush(Worker& w);
  void reap(Worker& w);
  void timers();

  WorkQueue& queue_;
  ExplorerCommand cmd_;
  std::shared_ptr<const std::string> setup_frame_;
  mutable std::mutex mu_;
  std::vector<std::unique_ptr<Worker>> workers_;
  std::shared_ptr<const std::string> weights_frame_;
  int64_t weights_version_ = -1;
  bool respawn_ = false;
  double respawn_delay_ = 0, preempt_mean_ = 0, next_preempt_ = -1;
  uint64_t preempt_seed_ = 0, preempt_draws_ = 0;
  int64_t failed_in_row_ = 0;  // explorers in a row that died before set-up (their replacements back off)
  std::vector<double> respawn_at_;
  PoolStats stats_;
  int wake_r_ = -1, wake_w_ = -1;
  int listen_fd_ = -1;
  std::string token_;
  std::atomic<bool> stopping_{false};
  std::thread io_;
};

}  // namespace temper::spotlight
