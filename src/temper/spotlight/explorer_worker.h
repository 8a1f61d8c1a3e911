// ExplorerPool's record of one explorer process (private to explorer_pool*.cpp).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>

#include "temper/spotlight/explorer_pool.h"
#include "temper/spotlight/wire.h"

namespace temper::spotlight {

struct ExplorerPool::Worker {
  int id = -1;
  pid_t pid = -1;
  int fd = -1;                       // the trainer's end of the socket (non-blocking)
  bool alive = true, ready = false;  // ready: has pulled once (setup and weights loaded)
  bool idle = false;                 // waiting for a request
  int64_t sent_version = -1, holding = -1;
  double dispatched = 0;  // queue clock when `holding` was sent
  size_t join = 0;        // index into PoolStats::joins
  std::string out;        // bytes not yet written
  FrameReader in;
};

}  // namespace temper::spotlight
