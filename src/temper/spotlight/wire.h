// The trainer <-> explorer protocol of Spotlight: framed messages over one Unix stream socket per explorer.
// A frame is magic "TSPL" (u32), type (u32), header length (u32), blob length (u64), then a JSON header and a
// binary blob (weights as raw f32, rewards as raw f64: bits cross unchanged). An explorer killed mid-write
// leaves a partial frame: the reader drops it at end of stream, so only whole results are ever committed.
// Leaves out the work itself (work_queue.h, explorer_loop.h).
#pragma once

#include <cstdint>
#include <cstring>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace temper::spotlight {

enum class MsgType : uint32_t {
  setup = 1,    // trainer -> explorer: what to build (header), tensors it needs (blob)
  weights = 2,  // trainer -> explorer: {version}, blob = the flat f32 parameters
  request = 3,  // trainer -> explorer: {id, step, group, label, first_seed, count}
  stop = 4,     // trainer -> explorer: exit
  pull = 5,     // explorer -> trainer: ready for a request {version, ready_s}
  result = 6,   // explorer -> trainer: {id, version, seconds, seeds}, blob = the rewards as f64
  hello = 7,    // explorer -> trainer, first on a TCP connection: {token} (TEMPER_EXPLORER_TOKEN)
};
const char* msg_type_name(MsgType t);

struct Message {
  MsgType type = MsgType::stop;
  nlohmann::json head = nlohmann::json::object();
  std::string blob;
};

std::string encode(const Message& m);
// The same frame from its parts (a large blob copied once, straight into the frame).
std::string encode_frame(MsgType type, const nlohmann::json& head, std::string_view blob);

// Accumulates bytes from a non-blocking socket and yields whole messages.
class FrameReader {
 public:
  void feed(const char* data, size_t n) { buf_.append(data, n); }
  std::optional<Message> next();  // throws naming the frame on a bad magic or type
  size_t buffered() const { return buf_.size(); }
  // A frame whose header and JSON head are buffered and more than `min_rest` bytes of its blob are not: that message
  // with the blob's bytes so far (blob sized to its full length, `have` of them filled), the buffer emptied; else
  // nullopt.
  std::optional<Message> take_partial(size_t min_rest, size_t& have);

 private:
  std::string buf_;
};

// Blocking I/O (the explorer's side). write_all sends with MSG_NOSIGNAL (a dead peer is an error, not SIGPIPE).
void write_all(int fd, const std::string& bytes);
class SocketReader {
 public:
  explicit SocketReader(int fd) : fd_(fd) {}
  // nullopt at end of stream (a partial frame is dropped). A frame's blob is read straight into the message (one
  // copy of a weights version, not three).
  std::optional<Message> next();

 private:
  int fd_;
  FrameReader frames_;
};

// TCP for explorers on other machines. listen_tcp: a listening socket on "HOST:PORT" (port 0: any free one),
// non-blocking and close-on-exec; `port` gets the bound port. connect_tcp: a connected socket to "HOST:PORT", retrying
// for up to timeout_s. Both throw naming the address.
int listen_tcp(const std::string& address, int& port);
int connect_tcp(const std::string& address, double timeout_s);
// "HOST:PORT" split; throws naming `key` unless it has a host and a port 0-65535.
std::pair<std::string, int> split_address(const std::string& address, const std::string& key);
bool is_loopback(const std::string& host);  // localhost, 127.x.x.x, ::1

template <class T>
std::string to_blob(const std::vector<T>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
}
template <class T>
std::vector<T> from_blob(const std::string& b, size_t offset = 0, size_t count = SIZE_MAX) {
  const size_t n = count == SIZE_MAX ? (b.size() - offset) / sizeof(T) : count;
  std::vector<T> v(n);
  if (n > 0) std::memcpy(v.data(), b.data() + offset, n * sizeof(T));
  return v;
}

}  // namespace temper::spotlight
