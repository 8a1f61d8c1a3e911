#include "temper/spotlight/wire.h"

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

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
  TEMPER_CHECK(type >= 1 && type <= 6) << "spotlight wire: unknown message type " << type;
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
  if (get<uint32_t>(p) != kMagic || type < 1 || type > 6 || blob_len >= kMaxBlob || buf_.size() < kHeader + head_len ||
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

}  // namespace temper::spotlight
