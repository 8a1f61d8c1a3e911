#include "temper/reward/child_process.h"

#include <fcntl.h>
#include <linux/close_range.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <map>
#include <thread>

#include "temper/core/error.h"

extern char** environ;

namespace temper::reward {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_left(Clock::time_point deadline) {
  return std::chrono::duration<double>(deadline - Clock::now()).count();
}

std::vector<std::string> child_environment(const std::vector<std::string>& add) {
  std::map<std::string, std::string> env;
  for (char** e = environ; e && *e; ++e) {
    std::string s(*e);
    size_t eq = s.find('=');
    if (eq != std::string::npos) env[s.substr(0, eq)] = s;
  }
  for (const std::string& s : add) {
    size_t eq = s.find('=');
    if (eq != std::string::npos) env[s.substr(0, eq)] = s;
  }
  std::vector<std::string> out;
  for (auto& [k, v] : env) out.push_back(v);
  return out;
}

std::vector<char*> c_strings(std::vector<std::string>& v) {
  std::vector<char*> out;
  for (std::string& s : v) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

// The child between fork and exec: only async-signal-safe calls.
[[noreturn]] void exec_child(int io, int err_w, int report_w, const char* path, char* const* argv, char* const* envp) {
  setpgid(0, 0);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  signal(SIGPIPE, SIG_DFL);
  if (dup2(io, 0) < 0 || dup2(io, 1) < 0 || dup2(err_w, 2) < 0) {
    int e = errno;
    (void)!write(report_w, &e, sizeof e);
    _exit(127);
  }
  syscall(SYS_close_range, 3u, ~0u, CLOSE_RANGE_CLOEXEC);
  execve(path, argv, envp);
  int e = errno;
  (void)!write(report_w, &e, sizeof e);
  _exit(127);
}

}  // namespace

std::string find_executable(const std::string& cmd) {
  if (cmd.empty()) return {};
  if (cmd.find('/') != std::string::npos) return access(cmd.c_str(), X_OK) == 0 ? cmd : std::string();
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "/usr/local/bin:/usr/bin:/bin";
  size_t start = 0;
  while (start <= dirs.size()) {
    size_t end = dirs.find(':', start);
    if (end == std::string::npos) end = dirs.size();
    std::string dir = dirs.substr(start, end - start);
    std::string full = (dir.empty() ? "." : dir) + "/" + cmd;
    if (access(full.c_str(), X_OK) == 0) return full;
    start = end + 1;
  }
  return {};
}

std::unique_ptr<ChildProcess> ChildProcess::spawn(const SpawnOptions& opt) {
  TEMPER_CHECK(!opt.argv.empty()) << opt.what << ": empty command";
  const std::string path = find_executable(opt.argv[0]);
  TEMPER_CHECK(!path.empty()) << opt.what << ": cannot start '" << opt.argv[0] << "': "
                              << (opt.argv[0].find('/') != std::string::npos ? "no such executable file"
                                                                             : "not found in PATH");
  std::vector<std::string> args = opt.argv, env = child_environment(opt.env);
  std::vector<char*> argv = c_strings(args), envp = c_strings(env);
  int sv[2], errp[2], rep[2];
  TEMPER_CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0)
      << opt.what << ": socketpair: " << std::strerror(errno);
  TEMPER_CHECK(pipe2(errp, O_CLOEXEC) == 0 && pipe2(rep, O_CLOEXEC) == 0) << opt.what << ": pipe: " << std::strerror(errno);
  const pid_t pid = fork();
  if (pid == 0) exec_child(sv[1], errp[1], rep[1], path.c_str(), argv.data(), envp.data());
  const int fork_errno = errno;
  ::close(sv[1]);
  ::close(errp[1]);
  ::close(rep[1]);
  if (pid < 0) {
    ::close(sv[0]), ::close(errp[0]), ::close(rep[0]);
    TEMPER_FAIL() << opt.what << ": cannot start '" << opt.argv[0] << "': fork: " << std::strerror(fork_errno);
  }
  int child_errno = 0;
  ssize_t n;
  do n = read(rep[0], &child_errno, sizeof child_errno);
  while (n < 0 && errno == EINTR);
  ::close(rep[0]);
  std::unique_ptr<ChildProcess> c(new ChildProcess());
  c->pid_ = pid;
  c->io_ = sv[0];
  c->err_ = errp[0];
  fcntl(c->io_, F_SETFL, fcntl(c->io_, F_GETFL) | O_NONBLOCK);
  fcntl(c->err_, F_SETFL, fcntl(c->err_, F_GETFL) | O_NONBLOCK);
  if (n == static_cast<ssize_t>(sizeof child_errno)) {
    c->reap(true);
    TEMPER_FAIL() << opt.what << ": cannot execute '" << path << "': " << std::strerror(child_errno);
  }
  return c;
}

ChildProcess::~ChildProcess() {
  kill();
  if (io_ >= 0) ::close(io_);
  if (err_ >= 0) ::close(err_);
}

void ChildProcess::take_stderr(std::string_view data) {
  err_partial_.append(data);
  size_t nl;
  while ((nl = err_partial_.find('\n')) != std::string::npos) {
    err_tail_.push_back(err_partial_.substr(0, nl));
    err_partial_.erase(0, nl + 1);
    if (err_tail_.size() > 64) err_tail_.pop_front();
  }
  if (err_partial_.size() > 4096) {  // a line without end: keep its start
    err_tail_.push_back(err_partial_.substr(0, 4096));
    err_partial_.clear();
    if (err_tail_.size() > 64) err_tail_.pop_front();
  }
}

void ChildProcess::drain_stderr() {
  char buf[4096];
  while (err_ >= 0) {
    ssize_t n = read(err_, buf, sizeof buf);
    if (n > 0) {
      take_stderr(std::string_view(buf, static_cast<size_t>(n)));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n == 0) ::close(err_), err_ = -1;  // the child closed stderr
    return;                                 // EAGAIN: nothing more now
  }
}

// Waits up to timeout_ms for the socket (readable, or writable when want_write) or stderr; drains stderr.
bool ChildProcess::poll_once(int timeout_ms, bool want_write, bool want_read) {
  pollfd fds[2] = {{io_, static_cast<short>((want_read ? POLLIN : 0) | (want_write ? POLLOUT : 0)), 0},
                   {err_, POLLIN, 0}};
  int r = ::poll(fds, err_ >= 0 ? 2 : 1, timeout_ms);
  if (r < 0 && errno != EINTR) return false;
  if (err_ >= 0 && (fds[1].revents & (POLLIN | POLLHUP | POLLERR))) drain_stderr();
  return true;
}

ChildProcess::Status ChildProcess::exchange(std::string_view request, std::string& reply, double timeout_s) {
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s));
  std::string data(request);
  data += '\n';
  size_t sent = 0;
  while (sent < data.size()) {
    if (io_ < 0) return Status::closed;
    ssize_t n = ::send(io_, data.data() + sent, data.size() - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      sent += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return Status::closed;
    const double left = seconds_left(deadline);
    if (left <= 0) return Status::timeout;
    // The child may be writing (a reply or a flood) while we write: keep reading so neither side blocks.
    if (!poll_once(static_cast<int>(std::min(left * 1000 + 1, 1e6)), true, true)) return Status::closed;
    char buf[65536];
    ssize_t r = ::recv(io_, buf, sizeof buf, MSG_DONTWAIT);
    if (r == 0) return Status::closed;
    if (r > 0) out_buf_.append(buf, static_cast<size_t>(r));
    if (out_buf_.size() > kMaxLine) return Status::closed;
  }
  return read_line(reply, seconds_left(deadline));
}

ChildProcess::Status ChildProcess::read_line(std::string& line, double timeout_s) {
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s));
  for (;;) {
    size_t nl = out_buf_.find('\n');
    if (nl != std::string::npos) {
      line = out_buf_.substr(0, nl);
      out_buf_.erase(0, nl + 1);
      return Status::ok;
    }
    if (out_buf_.size() > kMaxLine || io_ < 0) return Status::closed;
    char buf[65536];
    ssize_t r = ::recv(io_, buf, sizeof buf, MSG_DONTWAIT);
    if (r == 0) {
      drain_stderr();
      return Status::closed;
    }
    if (r > 0) {
      out_buf_.append(buf, static_cast<size_t>(r));
      continue;
    }
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return Status::closed;
    const double left = seconds_left(deadline);
    if (left <= 0) {
      drain_stderr();
      return Status::timeout;
    }
    if (!poll_once(static_cast<int>(std::min(left * 1000 + 1, 1e6)), false, true)) return Status::closed;
  }
}

void ChildProcess::reap(bool block) {
  if (reaped_ || pid_ <= 0) return;
  int st = 0;
  pid_t r;
  do r = waitpid(pid_, &st, block ? 0 : WNOHANG);
  while (r < 0 && errno == EINTR);
  if (r == pid_) reaped_ = true, wait_status_ = st;
  if (r < 0) reaped_ = true;  // not our child any more (ECHILD)
}

void ChildProcess::kill() {
  if (pid_ <= 0 || reaped_) return;
  ::kill(-pid_, SIGKILL);  // the group the child leads
  ::kill(pid_, SIGKILL);
  reap(true);
  drain_stderr();
}

void ChildProcess::close(double grace_s) {
  if (io_ >= 0) ::shutdown(io_, SHUT_WR);
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(grace_s));
  while (!reaped_ && seconds_left(deadline) > 0) {
    reap(false);
    if (!reaped_) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  kill();
}

std::string ChildProcess::exit_description() {
  reap(false);
  if (!reaped_) return "running";
  if (WIFEXITED(wait_status_)) return "exited with status " + std::to_string(WEXITSTATUS(wait_status_));
  if (WIFSIGNALED(wait_status_)) {
    const int s = WTERMSIG(wait_status_);
    return "killed by signal " + std::to_string(s) + " (" + strsignal(s) + ")";
  }
  return "stopped";
}

std::string ChildProcess::stderr_tail(size_t lines) {
  drain_stderr();
  std::vector<std::string> all(err_tail_.begin(), err_tail_.end());
  if (!err_partial_.empty()) all.push_back(err_partial_);
  std::string out;
  for (size_t i = all.size() > lines ? all.size() - lines : 0; i < all.size(); ++i) {
    if (all[i].empty()) continue;
    if (!out.empty()) out += " | ";
    out += all[i];
  }
  return out;
}

std::string shorten(const std::string& s, size_t n) {
  std::string out = s.substr(0, n);
  for (char& c : out)
    if (c == '\n' || c == '\r') c = ' ';
  return s.size() > n ? out + "..." : out;
}

std::string command_text(const std::vector<std::string>& argv) {
  std::string out;
  for (const std::string& a : argv) out += (out.empty() ? "" : " ") + a;
  return out;
}

}  // namespace temper::reward
