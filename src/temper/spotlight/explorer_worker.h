// ExplorerPool's record of one explorer process (private to explorer_pool*.cpp).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <utility>

#include "temper/spotlight/explorer_pool.h"
#include "temper/spotlight/wire.h"

namespace temper::spotlight {

// Frames waiting to be written to one explorer, each shared (a weights version is one buffer for every explorer,
// never copied per explorer) and written from an offset (never erased from the front: a frame of hundreds of MB goes
// out in the socket's pieces in linear time).
class OutQueue {
 public:
  void push(std::shared_ptr<const std::string> frame) {
    if (!frame->empty()) q_.push_back({std::move(frame), 0});
  }
  void push(std::string frame) { push(std::make_shared<const std::string>(std::move(frame))); }
  bool empty() const { return q_.empty(); }
  const char* data() const { return q_.front().first->data() + q_.front().second; }
  size_t size() const { return q_.front().first->size() - q_.front().second; }  // of the front frame
  void consume(size_t n) {
    if ((q_.front().second += n) == q_.front().first->size()) q_.pop_front();
  }

 private:
  std::deque<std::pair<std::shared_ptr<const std::string>, size_t>> q_;
};

struct ExplorerPool::Worker {
  int id = -1;
  pid_t pid = -1;
  int fd = -1;                       // the trainer's end of the socket (non-blocking)
  bool alive = true, ready = false;  // ready: has pulled once (setup and weights loaded)
  bool idle = false;                 // waiting for a request
  bool remote = false;   // connected over TCP (listen): no pid; a kill shuts its socket, no replacement is started
  bool admitted = true;  // a remote one: its hello carried the token (before that it is sent nothing)
  bool killed = false;   // by the pool (kill, kill_busy, the preemption schedule): not a failed start
  int64_t sent_version = -1, holding = -1;
  double dispatched = 0;  // queue clock when `holding` was sent
  size_t join = 0;        // index into PoolStats::joins
  OutQueue out;           // frames not yet written
  FrameReader in;
};

}  // namespace temper::spotlight
