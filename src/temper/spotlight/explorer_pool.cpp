#include "temper/spotlight/explorer_pool.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>

#include "temper/core/error.h"
#include "temper/core/rng.h"
#include "temper/spotlight/explorer_worker.h"

extern char** environ;

namespace temper::spotlight {

namespace {
// Starts argv with `child_fd` as its fd 3 (every other descriptor closed), signals at their defaults and unmasked,
// in a process group of its own (a terminal's Ctrl-C reaches the trainer, which stops its explorers).
pid_t spawn_process(const std::vector<std::string>& argv, int child_fd) {
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, child_fd, 3);
  posix_spawn_file_actions_addclosefrom_np(&fa, 4);
  posix_spawnattr_t at;
  posix_spawnattr_init(&at);
  sigset_t none, def;
  sigemptyset(&none);
  sigemptyset(&def);
  for (int s : {SIGINT, SIGTERM, SIGPIPE, SIGHUP}) sigaddset(&def, s);
  posix_spawnattr_setsigmask(&at, &none);
  posix_spawnattr_setsigdefault(&at, &def);
  posix_spawnattr_setpgroup(&at, 0);
  posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, args[0], &fa, &at, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&at);
  TEMPER_CHECK(rc == 0) << "spotlight: cannot start the explorer '" << argv[0] << "': " << std::strerror(rc);
  return pid;
}
}  // namespace

ExplorerPool::ExplorerPool(WorkQueue& queue, ExplorerCommand cmd) : queue_(queue), cmd_(std::move(cmd)) {
  TEMPER_CHECK(!cmd_.argv.empty()) << "spotlight: no explorer command";
  cmd_.argv.push_back("--fd");
  cmd_.argv.push_back("3");
  setup_frame_ = std::make_shared<const std::string>(encode(cmd_.setup));
  int p[2];
  TEMPER_CHECK(::pipe2(p, O_CLOEXEC | O_NONBLOCK) == 0) << "spotlight: pipe: " << std::strerror(errno);
  wake_r_ = p[0], wake_w_ = p[1];
  io_ = std::thread([this] { loop(); });
}

ExplorerPool::~ExplorerPool() {
  stop();
  if (listen_fd_ >= 0) ::close(listen_fd_);
  ::close(wake_r_);
  ::close(wake_w_);
}

void ExplorerPool::wake() {
  const char c = 1;
  [[maybe_unused]] const ssize_t n = ::write(wake_w_, &c, 1);
}

int ExplorerPool::spawn() {
  std::lock_guard<std::mutex> g(mu_);
  return spawn_locked();
}

int ExplorerPool::listen(const std::string& address, std::string token) {
  int port = 0;
  const int fd = listen_tcp(address, port);
  {
    std::lock_guard<std::mutex> g(mu_);
    TEMPER_CHECK(listen_fd_ < 0) << "spotlight: the pool already listens";
    listen_fd_ = fd, token_ = std::move(token);
  }
  wake();
  return port;
}

// Under the lock: every pending connection becomes a worker; sent the setup once admitted (handle: its hello).
void ExplorerPool::accept_remote() {
  while (!stopping_) {
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) return;
    // Small frames go out at once; a peer that vanished without closing (power, network) is found dead in ~25 s.
    const int one = 1, idle = 10, interval = 5, count = 3;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    ::setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
    ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
    ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval, sizeof(interval));
    ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &count, sizeof(count));
    auto w = std::make_unique<Worker>();
    w->fd = fd, w->remote = true, w->admitted = token_.empty();
    add_worker(std::move(w));
  }
}

void ExplorerPool::send_setup(Worker& w) {
  w.out.push(setup_frame_);
  if (weights_frame_) w.out.push(weights_frame_), w.sent_version = weights_version_;
}

int ExplorerPool::add_worker(std::unique_ptr<Worker> w) {
  w->id = static_cast<int>(workers_.size());
  if (w->admitted) send_setup(*w);
  w->join = stats_.joins.size();
  stats_.joins.push_back({w->id, queue_.now(), -1, -1});
  ++stats_.spawned;
  workers_.push_back(std::move(w));
  return workers_.back()->id;
}

void ExplorerPool::kill_worker(Worker& w, int sig) {
  w.killed = true;
  if (w.remote)
    ::shutdown(w.fd, SHUT_RDWR);  // its end sees the end of stream; ours reads it and reaps
  else
    ::kill(w.pid, sig);
}

int ExplorerPool::spawn_locked() {
  TEMPER_CHECK(!stopping_) << "spotlight: spawn after stop";
  int sv[2];
  TEMPER_CHECK(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0)
      << "spotlight: socketpair: " << std::strerror(errno);
  int child = sv[1];
  if (child == 3) {  // dup2(3, 3) would keep FD_CLOEXEC: move it out of the way first
    child = ::fcntl(sv[1], F_DUPFD_CLOEXEC, 10);
    ::close(sv[1]);
  }
  auto w = std::make_unique<Worker>();
  try {
    w->pid = spawn_process(cmd_.argv, child);
  } catch (...) {
    ::close(child);
    ::close(sv[0]);
    throw;
  }
  ::close(child);
  w->fd = sv[0];
  ::fcntl(w->fd, F_SETFL, ::fcntl(w->fd, F_GETFL) | O_NONBLOCK);
  const int id = add_worker(std::move(w));
  wake();
  return id;
}

void ExplorerPool::set_weights(int64_t version, std::span<const float> params) {
  {
    std::lock_guard<std::mutex> g(mu_);
    if (version == weights_version_) return;
  }
  // Framed outside the lock (the I/O thread keeps serving), the parameters copied once into the frame.
  auto frame = std::make_shared<const std::string>(
      encode_frame(MsgType::weights, {{"version", version}},
                   std::string_view(reinterpret_cast<const char*>(params.data()), params.size_bytes())));
  {
    std::lock_guard<std::mutex> g(mu_);
    weights_frame_ = std::move(frame);
    weights_version_ = version;
  }
  wake();
}

int64_t ExplorerPool::weights_version() const {
  std::lock_guard<std::mutex> g(mu_);
  return weights_version_;
}

bool ExplorerPool::kill(int worker, int sig) {
  std::lock_guard<std::mutex> g(mu_);
  if (worker < 0 || worker >= static_cast<int>(workers_.size()) || !workers_[static_cast<size_t>(worker)]->alive)
    return false;
  ++stats_.killed;
  kill_worker(*workers_[static_cast<size_t>(worker)], sig);
  return true;
}

int ExplorerPool::kill_busy(double wait_s) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(wait_s);
  do {
    {
      std::lock_guard<std::mutex> g(mu_);
      for (auto& w : workers_) {
        if (!w->alive || w->holding < 0) continue;
        ++stats_.killed;
        kill_worker(*w, SIGKILL);
        return w->id;
      }
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  } while (std::chrono::steady_clock::now() < deadline);
  return -1;
}

void ExplorerPool::set_respawn(bool on, double delay_s) {
  std::lock_guard<std::mutex> g(mu_);
  respawn_ = on, respawn_delay_ = delay_s;
}

void ExplorerPool::set_preemption(double mean_s, uint64_t seed) {
  std::lock_guard<std::mutex> g(mu_);
  preempt_mean_ = mean_s, preempt_seed_ = seed, next_preempt_ = -1;
}

int ExplorerPool::alive() const {
  std::lock_guard<std::mutex> g(mu_);
  int n = 0;
  for (const auto& w : workers_) n += w->alive ? 1 : 0;
  return n;
}

int ExplorerPool::alive_or_coming() const {
  std::lock_guard<std::mutex> g(mu_);
  int n = static_cast<int>(respawn_at_.size()) + (listen_fd_ >= 0 ? 1 : 0);
  for (const auto& w : workers_) n += w->alive ? 1 : 0;
  return n;
}

int64_t ExplorerPool::failed_starts_in_row() const {
  std::lock_guard<std::mutex> g(mu_);
  return failed_in_row_;
}

int ExplorerPool::ready() const {
  std::lock_guard<std::mutex> g(mu_);
  int n = 0;
  for (const auto& w : workers_) n += w->alive && w->ready ? 1 : 0;
  return n;
}

PoolStats ExplorerPool::stats() const {
  std::lock_guard<std::mutex> g(mu_);
  return stats_;
}

void ExplorerPool::stop() {
  if (stopping_.exchange(true)) {
    if (io_.joinable()) io_.join();
    return;
  }
  {
    std::lock_guard<std::mutex> g(mu_);
    const std::string frame = encode({MsgType::stop, nlohmann::json::object(), {}});
    for (auto& w : workers_)
      if (w->alive) w->out.push(frame);
    respawn_at_.clear();
  }
  wake();
  if (io_.joinable()) io_.join();
}

}  // namespace temper::spotlight
