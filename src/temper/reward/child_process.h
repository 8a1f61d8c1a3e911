// A child process spoken to in lines: its stdin and stdout are a socket pair (writes never raise SIGPIPE), its
// stderr a pipe whose last lines are kept for error messages. The child leads its own process group (kill()
// reaches what it started too). A command that cannot be found or executed
// is an error at spawn() naming it; everything after that is a status, never an exception. When this process
// ends, the child reads the end of its stdin (no death signal: Linux ties that to the thread that forked).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace temper::reward {

struct SpawnOptions {
  std::vector<std::string> argv;  // argv[0] is looked up in PATH unless it holds a '/'
  std::vector<std::string> env;   // "KEY=value" added to (or replacing in) this process's environment
  std::string what;               // names the child in messages ("reward 'format' worker 1")
};

class ChildProcess {
 public:
  enum class Status { ok, timeout, closed };  // closed: the child closed stdout (exited, crashed) or stdin

  // Starts the child; throws temper::Error naming the command when it is not found or cannot be executed.
  static std::unique_ptr<ChildProcess> spawn(const SpawnOptions& opt);
  ~ChildProcess();  // kill() and reap
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  // Writes `request` (one line, '\n' appended) and reads one reply line, within timeout_s for both; stderr is
  // drained meanwhile. A line over max_line bytes is `closed` (the child is misbehaving).
  Status exchange(std::string_view request, std::string& reply, double timeout_s);
  // Reads one line (no request), e.g. a greeting.
  Status read_line(std::string& line, double timeout_s);
  // SIGKILL to the child's process group, then reap. Idempotent.
  void kill();
  // Closes stdin and waits up to grace_s for the child to exit, then kill().
  void close(double grace_s);

  // "exited with status 3", "killed by signal 9 (Killed)", "running".
  std::string exit_description();
  // The last `lines` lines the child wrote to stderr, joined with " | " (empty: none).
  std::string stderr_tail(size_t lines = 8);

  static constexpr size_t kMaxLine = size_t{64} << 20;

 private:
  ChildProcess() = default;
  bool poll_once(int timeout_ms, bool want_write, bool want_read);
  void drain_stderr();
  void take_stderr(std::string_view data);
  void reap(bool block);

  pid_t pid_ = -1;
  int io_ = -1;   // our end of the socket pair (the child's stdin and stdout)
  int err_ = -1;  // read end of the child's stderr
  bool reaped_ = false;
  int wait_status_ = 0;
  std::string out_buf_;              // stdout bytes read past the last full line
  std::string err_partial_;          // stderr bytes after the last newline
  std::deque<std::string> err_tail_;  // the last stderr lines
};

// For messages about workers: `s` on one line (newlines as spaces), cut to n bytes with "..."; argv as one line.
std::string shorten(const std::string& s, size_t n = 200);
std::string command_text(const std::vector<std::string>& argv);

// Absolute path of `cmd` (searched in PATH when it has no '/'), or empty when not found or not executable.
std::string find_executable(const std::string& cmd);

}  // namespace temper::reward
