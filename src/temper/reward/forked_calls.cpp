#include "temper/reward/forked_calls.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <exception>

#include "temper/core/error.h"

namespace temper::reward {

namespace {

using Clock = std::chrono::steady_clock;

bool write_all(int fd, const void* data, size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w, n -= static_cast<size_t>(w);
  }
  return true;
}

// A record: index (u64), ok (u8: 1 a result, 0 an exception's message), length (u64), bytes.
constexpr size_t kHeader = 8 + 1 + 8;

[[noreturn]] void child_main(int fd, size_t from, size_t n, const std::function<std::string(size_t)>& fn) {
  for (size_t i = from; i < n; ++i) {
    std::string out;
    uint8_t ok = 1;
    try {
      out = fn(i);
    } catch (const std::exception& e) {
      ok = 0, out = e.what();
    } catch (...) {
      ok = 0, out = "an exception that is not a std::exception";
    }
    const uint64_t idx = i, len = out.size();
    char head[kHeader];
    std::memcpy(head, &idx, 8);
    head[8] = static_cast<char>(ok);
    std::memcpy(head + 9, &len, 8);
    if (!write_all(fd, head, kHeader) || !write_all(fd, out.data(), out.size())) _exit(1);
  }
  _exit(0);
}

std::string status_text(int st) {
  if (WIFSIGNALED(st)) return std::string("killed by signal ") + strsignal(WTERMSIG(st));
  if (WIFEXITED(st)) return "exited with status " + std::to_string(WEXITSTATUS(st));
  return "stopped";
}

int wait_child(pid_t pid) {
  int st = 0;
  while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
  return st;
}

}  // namespace

std::vector<std::optional<std::string>> run_forked(size_t n, const std::function<std::string(size_t)>& fn,
                                                   double timeout_s, ForkedCallsStats* stats,
                                                   std::vector<std::string>* why) {
  std::vector<std::optional<std::string>> out(n);
  if (why) why->assign(n, "");
  ForkedCallsStats local;
  ForkedCallsStats& st = stats ? *stats : local;
  size_t next = 0;
  while (next < n) {
    int p[2];
    TEMPER_CHECK(pipe2(p, O_CLOEXEC) == 0) << "reward: pipe: " << std::strerror(errno);
    const pid_t pid = fork();
    if (pid == 0) {
      ::close(p[0]);
      child_main(p[1], next, n, fn);
    }
    const int fork_errno = errno;
    ::close(p[1]);
    if (pid < 0) {
      ::close(p[0]);
      TEMPER_FAIL() << "reward: fork: " << std::strerror(fork_errno);
    }
    ++st.children;
    std::string buf;
    auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s));
    bool child_gone = false;
    while (next < n) {
      if (buf.size() >= kHeader) {  // a whole record?
        uint64_t idx = 0, len = 0;
        std::memcpy(&idx, buf.data(), 8);
        std::memcpy(&len, buf.data() + 9, 8);
        if (buf.size() >= kHeader + len) {
          const bool ok = buf[8] != 0;
          std::string body = buf.substr(kHeader, len);
          buf.erase(0, kHeader + len);
          if (idx != next) break;  // cannot happen (the child writes in order): item `next` fails below
          if (ok) {
            out[next] = std::move(body);
          } else {
            ++st.exceptions;
            if (why) (*why)[next] = "exception: " + body;
          }
          ++next;
          deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s));
          continue;
        }
      }
      int wait_ms = -1;
      if (timeout_s > 0) {
        const double left = std::chrono::duration<double>(deadline - Clock::now()).count();
        if (left <= 0) {
          ::kill(pid, SIGKILL);
          wait_child(pid);
          child_gone = true;
          ++st.timeouts;
          if (why) (*why)[next] = "still running after " + std::to_string(timeout_s) + " s: killed";
          ++next;
          break;
        }
        wait_ms = static_cast<int>(std::min(left * 1000 + 1, 1e6));
      }
      pollfd pfd{p[0], POLLIN, 0};
      const int ready = ::poll(&pfd, 1, wait_ms);
      if (ready < 0 && errno != EINTR) break;
      if (ready <= 0) continue;  // the deadline is checked above
      char chunk[65536];
      ssize_t r = ::read(p[0], chunk, sizeof chunk);
      if (r > 0) {
        buf.append(chunk, static_cast<size_t>(r));
      } else if (r == 0) {  // the child died before finishing item `next`
        const int status = wait_child(pid);
        child_gone = true;
        ++st.crashes;
        if (why) (*why)[next] = "the verifying process " + status_text(status);
        ++next;
        break;
      } else if (errno != EINTR && errno != EAGAIN) {
        break;
      }
    }
    ::close(p[0]);
    if (!child_gone) {
      ::kill(pid, SIGKILL);  // done (or lost): it exits anyway
      wait_child(pid);
      if (next < n) {  // lost track of the child (a poll or read error): that item fails, a new child goes on
        ++st.crashes;
        if (why) (*why)[next] = "lost the verifying process";
        ++next;
      }
    }
  }
  return out;
}

}  // namespace temper::reward
