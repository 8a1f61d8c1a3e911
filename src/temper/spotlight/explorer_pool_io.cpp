// ExplorerPool's I/O thread (explorer_pool.h): poll, read frames, commit results, hand out work, write
// non-blocking (a busy explorer's unread weights never stall the others), reap the dead, run the timers.
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>

#include "temper/core/rng.h"
#include "temper/spotlight/explorer_pool.h"
#include "temper/spotlight/explorer_worker.h"

namespace temper::spotlight {

namespace {
// The token compared in time that does not depend on where the first difference is.
bool same_token(const std::string& a, const std::string& b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i % std::max<size_t>(b.size(), 1)]);
  return diff == 0;
}
}  // namespace

void ExplorerPool::loop() {
  const auto t_stop_limit = std::chrono::seconds(2);
  std::chrono::steady_clock::time_point stop_deadline{};
  bool killed_all = false;
  while (true) {
    std::vector<int> dead;
    step_io(dead);
    std::lock_guard<std::mutex> g(mu_);
    for (int id : dead) reap(*workers_[static_cast<size_t>(id)]);
    bool any = false;
    for (auto& w : workers_) any = any || w->alive;
    if (stopping_) {
      if (!any) return;
      if (stop_deadline == std::chrono::steady_clock::time_point{})
        stop_deadline = std::chrono::steady_clock::now() + t_stop_limit;
      if (!killed_all && std::chrono::steady_clock::now() > stop_deadline) {
        for (auto& w : workers_)
          if (w->alive) kill_worker(*w, SIGKILL);
        killed_all = true;
      }
      continue;
    }
    timers();
    feed_work();
  }
}

// One poll over the wake pipe and every live socket; reads and writes what is ready.
void ExplorerPool::step_io(std::vector<int>& dead) {
  std::vector<pollfd> fds{{wake_r_, POLLIN, 0}, {-1, POLLIN, 0}};  // the wake pipe, the listening socket
  std::vector<int> ids;
  {
    std::lock_guard<std::mutex> g(mu_);
    fds[1].fd = stopping_ ? -1 : listen_fd_;
    for (auto& w : workers_) {
      if (!w->alive) continue;
      fds.push_back({w->fd, static_cast<short>(POLLIN | (w->out.empty() ? 0 : POLLOUT)), 0});
      ids.push_back(w->id);
    }
  }
  ::poll(fds.data(), fds.size(), 5);
  if (fds[0].revents & POLLIN) {
    char buf[256];
    while (::read(wake_r_, buf, sizeof(buf)) > 0) {
    }
  }
  std::lock_guard<std::mutex> g(mu_);
  if (fds[1].revents & POLLIN) accept_remote();
  for (size_t k = 2; k < fds.size(); ++k) {
    Worker& w = *workers_[static_cast<size_t>(ids[k - 2])];
    if (fds[k].revents & POLLOUT) flush(w);
    if (!(fds[k].revents & (POLLIN | POLLHUP | POLLERR))) continue;
    char buf[1 << 16];
    bool eof = false;
    while (true) {
      const ssize_t n = ::read(w.fd, buf, sizeof(buf));
      if (n > 0) {
        w.in.feed(buf, static_cast<size_t>(n));
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      eof = n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK);
      break;
    }
    if (!w.admitted && w.in.buffered() > 4096) {  // before its token a peer may send one small hello, nothing more
      std::fprintf(stderr, "spotlight: a connection sent more than a hello before its token: dropped\n");
      w.killed = true;
      ::shutdown(w.fd, SHUT_RDWR);
      eof = true;
    }
    try {
      while (w.alive && (w.admitted || !w.killed))  // a rejected peer's further frames are not read
        if (auto m = w.in.next())
          handle(w, std::move(*m));
        else
          break;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "spotlight: explorer %d sent a bad frame (%s): stopping it\n", w.id, e.what());
      kill_worker(w, SIGKILL);
      w.killed = false;  // its own fault: a failed start if it was not set up
      eof = true;
    }
    if (eof) dead.push_back(w.id);
  }
  for (auto& w : workers_)
    if (w->alive && !w->out.empty()) flush(*w);
}

void ExplorerPool::handle(Worker& w, Message m) {
  ExplorerJoin& j = stats_.joins[w.join];
  if (!w.admitted) {  // a remote explorer's first message: its hello with the token
    if (m.type != MsgType::hello || !same_token(m.head.value("token", std::string()), token_)) {
      std::fprintf(stderr,
                   "spotlight: an explorer connected without the right token (TEMPER_EXPLORER_TOKEN): dropped\n");
      w.killed = true;  // not a failed start
      ::shutdown(w.fd, SHUT_RDWR);
      return;
    }
    w.admitted = true;
    send_setup(w);
    return;
  }
  if (m.type == MsgType::hello) return;  // admitted already (no token asked)
  if (m.type == MsgType::pull) {
    w.ready = true, w.idle = true;
    failed_in_row_ = 0;
    if (j.ready < 0) j.ready = queue_.now();
    return;
  }
  if (m.type != MsgType::result) return;
  ExploreResult r;
  r.request = m.head.at("id").get<int64_t>();
  r.version = m.head.at("version").get<int64_t>();
  r.seconds = m.head.at("seconds").get<double>();
  if (m.head.contains("seeds")) {
    r.seeds = m.head.at("seeds").get<std::vector<uint64_t>>();
    r.rewards = from_blob<double>(m.blob);
  } else {
    r.payload = std::move(m.blob);
  }
  stats_.explorer_seconds += r.seconds;
  if (j.first_result < 0) j.first_result = queue_.now();
  queue_.commit(w.id, std::move(r));
  w.holding = -1, w.idle = true;
}

// Weights first (a newer version than the explorer has), then a request to every idle explorer.
void ExplorerPool::feed_work() {
  for (auto& w : workers_) {
    if (!w->alive || !w->admitted) continue;
    if (weights_frame_ && weights_version_ > w->sent_version) {
      w->out.push(weights_frame_);
      w->sent_version = weights_version_;
    }
    if (!w->ready || !w->idle) continue;
    std::optional<ExploreRequest> r = queue_.pull(w->id);
    if (!r) continue;
    w->out.push(encode({MsgType::request,
                        {{"id", r->id},
                         {"step", r->step},
                         {"group", r->group},
                         {"label", r->label},
                         {"first_seed", r->first_seed},
                         {"count", r->count}},
                        r->payload}));
    w->idle = false, w->holding = r->id, w->dispatched = queue_.now();
    flush(*w);
  }
}

void ExplorerPool::flush(Worker& w) {
  while (!w.out.empty()) {
    const ssize_t n = ::send(w.fd, w.out.data(), w.out.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      w.out.consume(static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    return;  // EAGAIN: later; EPIPE: the read side sees the end of stream
  }
}

void ExplorerPool::reap(Worker& w) {
  if (!w.alive) return;
  w.alive = false;
  ::close(w.fd);
  int status = 0;
  while (!w.remote && ::waitpid(w.pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (w.holding >= 0) stats_.lost_seconds += queue_.now() - w.dispatched;
  queue_.worker_lost(w.id);
  w.out = {}, w.in = {};  // the frames it was sent (a weights version each) are not kept for the dead
  if (stopping_) return;
  ++stats_.deaths;
  // It died setting up on its own (a kill while joining is not that; a connection's fate is its machine's).
  const bool failed = !w.ready && !w.killed && !w.remote;
  if (w.ready) failed_in_row_ = 0;
  if (failed) ++failed_in_row_, ++stats_.failed_starts;
  // A program that fails to set up is started again after a growing pause (0.1 s after the second failure in a row,
  // doubling, at most 5 s) rather than at once in a loop.
  const double backoff =
      failed_in_row_ < 2
          ? 0
          : std::min(5.0, 0.1 * std::ldexp(1.0, static_cast<int>(std::min<int64_t>(failed_in_row_, 8)) - 2));
  if (respawn_ && !w.remote) respawn_at_.push_back(queue_.now() + respawn_delay_ + backoff);
}

void ExplorerPool::timers() {
  const double now = queue_.now();
  for (size_t i = 0; i < respawn_at_.size();) {
    if (respawn_at_[i] > now) {
      ++i;
      continue;
    }
    respawn_at_.erase(respawn_at_.begin() + static_cast<std::ptrdiff_t>(i));
    if (stopping_) return;
    try {
      spawn_locked();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "spotlight: replacing an explorer failed: %s\n", e.what());
    }
  }
  if (preempt_mean_ <= 0) return;
  Rng rng(mix_seed(preempt_seed_, preempt_draws_));
  if (next_preempt_ < 0) {
    next_preempt_ = now - preempt_mean_ * std::log(1.0 - rng.uniform_f64());
    ++preempt_draws_;
    return;
  }
  if (now < next_preempt_) return;
  std::vector<Worker*> live;
  for (auto& w : workers_)
    if (w->alive) live.push_back(w.get());
  if (!live.empty()) {
    Worker* v = live[static_cast<size_t>(rng.uniform_f64() * static_cast<double>(live.size())) % live.size()];
    kill_worker(*v, SIGKILL);
    ++stats_.killed;
  }
  next_preempt_ = -1;
  ++preempt_draws_;
}

}  // namespace temper::spotlight
