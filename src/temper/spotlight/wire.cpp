#include "temper/spotlight/wire.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include "temper/core/error.h"

namespace temper::spotlight {

namespace {
constexpr uint32_t kMagic = 0x4c505354;  // "TSPL" little-endian
constexpr size_t kHeader = 4 + 4 + 4 + 8;
constexpr uint64_t kMaxBlob = uint64_t{1} << 36;

template <class T>
void put(std::string& s, T v) {
  s.append(reinterpret_cast<const char*>(&v), sizeof(T));
}
template <class T>
T get(const char* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}
}  // namespace

const char* msg_type_name(MsgType t) {
  switch (t) {
    case MsgType::setup:
      return "setup";
    case MsgType::weights:
      return "weights";
    case MsgType::request:
      return "request";
    case MsgType::stop:
      return "stop";
    case MsgType::pull:
      return "pull";
    case MsgType::hello:
      return "hello";
    case MsgType::result:
      return "result";
  }
  return "?";
}

std::string encode(const Message& m) {
  return encode_frame(m.type, m.head, m.blob);
}

std::string encode_frame(MsgType type, const nlohmann::json& head_json, std::string_view blob) {
  const std::string head = head_json.dump();
  std::string s;
  s.reserve(kHeader + head.size() + blob.size());
  put<uint32_t>(s, kMagic);
  put<uint32_t>(s, static_cast<uint32_t>(type));
  put<uint32_t>(s, static_cast<uint32_t>(head.size()));
  put<uint64_t>(s, blob.size());
  s += head;
  s += blob;
  return s;
}

std::optional<Message> FrameReader::next() {
  if (buf_.size() < kHeader) return std::nullopt;
  const char* p = buf_.data();
  TEMPER_CHECK(get<uint32_t>(p) == kMagic) << "spotlight wire: a frame without the magic TSPL (stream out of step)";
  const auto type = get<uint32_t>(p + 4);
  TEMPER_CHECK(type >= 1 && type <= 7) << "spotlight wire: unknown message type " << type;
  const auto head_len = get<uint32_t>(p + 8);
  const auto blob_len = get<uint64_t>(p + 12);
  TEMPER_CHECK(blob_len < kMaxBlob) << "spotlight wire: blob of " << blob_len << " bytes";
  const size_t total = kHeader + head_len + blob_len;
  if (buf_.size() < total) return std::nullopt;
  Message m;
  m.type = static_cast<MsgType>(type);
  m.head =
      nlohmann::json::parse(buf_.begin() + kHeader, buf_.begin() + static_cast<std::ptrdiff_t>(kHeader + head_len));
  m.blob.assign(buf_, kHeader + head_len, blob_len);
  buf_.erase(0, total);
  return m;
}

std::optional<Message> FrameReader::take_partial(size_t min_rest, size_t& have) {
  if (buf_.size() < kHeader) return std::nullopt;
  const char* p = buf_.data();
  const auto type = get<uint32_t>(p + 4);
  const auto head_len = get<uint32_t>(p + 8);
  const auto blob_len = get<uint64_t>(p + 12);
  if (get<uint32_t>(p) != kMagic || type < 1 || type > 7 || blob_len >= kMaxBlob || buf_.size() < kHeader + head_len ||
      buf_.size() >= kHeader + head_len + blob_len || kHeader + head_len + blob_len - buf_.size() <= min_rest)
    return std::nullopt;  // next() reports a bad frame, or reads the rest into the buffer
  Message m;
  m.type = static_cast<MsgType>(type);
  m.head =
      nlohmann::json::parse(buf_.begin() + kHeader, buf_.begin() + static_cast<std::ptrdiff_t>(kHeader + head_len));
  have = buf_.size() - kHeader - head_len;
  m.blob.resize(blob_len);
  std::memcpy(m.blob.data(), buf_.data() + kHeader + head_len, have);
  buf_.clear();
  return m;
}

void write_all(int fd, const std::string& bytes) {
  size_t off = 0;
  while (off < bytes.size()) {
    const ssize_t n = ::send(fd, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    TEMPER_CHECK(n > 0) << "spotlight wire: send on fd " << fd << " failed: " << std::strerror(errno);
    off += static_cast<size_t>(n);
  }
}

std::optional<Message> SocketReader::next() {
  char buf[1 << 16];
  while (true) {
    if (auto m = frames_.next()) return m;
    size_t have = 0;
    if (std::optional<Message> m = frames_.take_partial(sizeof(buf), have)) {
      while (have < m->blob.size()) {  // the rest of a large blob, read in place
        const ssize_t n = ::read(fd_, m->blob.data() + have, m->blob.size() - have);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return std::nullopt;
        have += static_cast<size_t>(n);
      }
      return m;
    }
    const ssize_t n = ::read(fd_, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return std::nullopt;
    frames_.feed(buf, static_cast<size_t>(n));
  }
}

std::pair<std::string, int> split_address(const std::string& address, const std::string& key) {
  const size_t colon = address.rfind(':');
  TEMPER_CHECK(colon != std::string::npos && colon > 0 && colon + 1 < address.size())
      << key << " = \"" << address << "\": expected HOST:PORT (e.g. 0.0.0.0:7070, or 127.0.0.1:0 for any free port)";
  std::string host = address.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  int port = -1;
  try {
    size_t used = 0;
    port = std::stoi(address.substr(colon + 1), &used);
    if (used != address.size() - colon - 1) port = -1;
  } catch (const std::exception&) {
  }
  TEMPER_CHECK(port >= 0 && port <= 65535) << key << " = \"" << address << "\": the port must be 0 to 65535";
  return {host, port};
}

bool is_loopback(const std::string& host) {
  in_addr v4{};
  in6_addr v6{};
  if (::inet_pton(AF_INET, host.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
  if (::inet_pton(AF_INET6, host.c_str(), &v6) == 1) return IN6_IS_ADDR_LOOPBACK(&v6);
  return host == "localhost";
}

namespace {
addrinfo* resolve(const std::string& host, int port, bool passive) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC, hints.ai_socktype = SOCK_STREAM, hints.ai_flags = passive ? AI_PASSIVE : 0;
  addrinfo* res = nullptr;
  const int rc = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res);
  TEMPER_CHECK(rc == 0 && res) << host << ":" << port << ": cannot resolve (" << ::gai_strerror(rc) << ")";
  return res;
}
}  // namespace

int listen_tcp(const std::string& address, int& port) {
  const auto [host, want] = split_address(address, "listen address");
  addrinfo* res = resolve(host, want, true);
  int fd = -1, err = 0;
  for (addrinfo* a = res; a && fd < 0; a = a->ai_next) {
    fd = ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    const int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (::bind(fd, a->ai_addr, a->ai_addrlen) == 0 && ::listen(fd, 16) == 0) break;
    err = errno;
    ::close(fd);
    fd = -1;
  }
  ::freeaddrinfo(res);
  TEMPER_CHECK(fd >= 0) << address << ": cannot listen (" << std::strerror(err) << ")";
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len);
  port = ntohs(ss.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port
                                        : reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
  return fd;
}

int connect_tcp(const std::string& address, double timeout_s) {
  const auto [host, port] = split_address(address, "--connect");
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  int err = 0;
  do {
    addrinfo* res = resolve(host, port, false);
    for (addrinfo* a = res; a; a = a->ai_next) {
      const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol);
      if (fd < 0) continue;
      // Non-blocking, so an unreachable host costs at most what is left of timeout_s (not the kernel's ~2 minutes).
      int rc = ::connect(fd, a->ai_addr, a->ai_addrlen);
      if (rc < 0 && errno == EINPROGRESS) {
        const auto left =
            std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
        pollfd p{fd, POLLOUT, 0};
        int so = ETIMEDOUT;
        socklen_t len = sizeof(so);
        if (::poll(&p, 1, static_cast<int>(std::max<int64_t>(left.count(), 1))) == 1)
          ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &so, &len);
        rc = so == 0 ? 0 : -1;
        errno = so;
      }
      if (rc == 0) {
        ::freeaddrinfo(res);
        ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);  // the explorer reads and writes blocking
        const int one = 1;
        ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        return fd;
      }
      err = errno;
      ::close(fd);
    }
    ::freeaddrinfo(res);
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  } while (std::chrono::steady_clock::now() < deadline);
  TEMPER_FAIL() << address << ": cannot connect (" << std::strerror(err) << ") within " << timeout_s << " s";
}

}  // namespace temper::spotlight
