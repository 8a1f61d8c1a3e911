// One `temper train` per run directory: an exclusive flock on DIR/.lock held for the process's life, the holder's pid
// written in it. A second process is refused naming that pid; a lock left by a killed run is no lock (the kernel
// drops a dead process's flock), so the directory is taken over without a step.
#pragma once

#include <string>

namespace temper::app {

class RunLock {
 public:
  // Takes DIR/.lock (DIR must exist); throws temper::Error naming the directory and the holder's pid when another
  // process holds it.
  explicit RunLock(const std::string& dir);
  ~RunLock();
  RunLock(const RunLock&) = delete;
  RunLock& operator=(const RunLock&) = delete;

 private:
  int fd_ = -1;
};

}  // namespace temper::app
