#include "temper/report/tensorboard.h"

#include <fcntl.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>

#include "temper/core/error.h"

namespace temper::report {
namespace fs = std::filesystem;

// ---- CRC-32C: byte-wise table (the rate here is a few records per step; no need for SSE4.2) ----

namespace {
constexpr std::array<uint32_t, 256> make_crc32c_table() {
  std::array<uint32_t, 256> t{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
    t[i] = c;
  }
  return t;
}
constexpr std::array<uint32_t, 256> kCrc32cTable = make_crc32c_table();
}  // namespace

uint32_t crc32c_extend(uint32_t crc, const void* data, size_t n) {
  const auto* p = static_cast<const unsigned char*>(data);
  uint32_t c = ~crc;
  for (size_t i = 0; i < n; ++i) c = kCrc32cTable[(c ^ p[i]) & 0xFFu] ^ (c >> 8);
  return ~c;
}
uint32_t crc32c(const void* data, size_t n) { return crc32c_extend(0, data, n); }
uint32_t crc32c_mask(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }

// ---- protobuf wire format, just what Event needs ----

namespace {
void put_le(std::string& out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}
void put_varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7F) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}
void put_tag(std::string& out, int field, int wire_type) { put_varint(out, (uint64_t(field) << 3) | wire_type); }
void put_bytes(std::string& out, int field, std::string_view s) {
  put_tag(out, field, 2);
  put_varint(out, s.size());
  out.append(s);
}
// Event fields 1 (wall_time) and 2 (step); proto3 leaves out zero values, and so do we.
std::string event_head(double wall_time, int64_t step) {
  std::string e;
  if (wall_time != 0) {
    uint64_t bits;
    std::memcpy(&bits, &wall_time, 8);
    put_tag(e, 1, 1);
    put_le(e, bits, 8);
  }
  if (step != 0) {
    put_tag(e, 2, 0);
    put_varint(e, static_cast<uint64_t>(step));  // negative: ten bytes, two's complement, as protobuf
  }
  return e;
}
}  // namespace

std::string tfrecord_frame(std::string_view payload) {
  std::string out;
  out.reserve(payload.size() + 16);
  put_le(out, payload.size(), 8);
  put_le(out, crc32c_mask(crc32c(out.data(), 8)), 4);
  out.append(payload);
  put_le(out, crc32c_mask(crc32c(payload.data(), payload.size())), 4);
  return out;
}

std::string tb_event_file_version(double wall_time) {
  std::string e = event_head(wall_time, 0);
  put_bytes(e, 3, "brain.Event:2");
  return e;
}

std::string tb_event_scalars(double wall_time, int64_t step, const MetricValues& tagged_values) {
  std::string summary;
  for (const auto& [tag, v] : tagged_values) {
    std::string value;
    if (!tag.empty()) put_bytes(value, 1, tag);
    float f = static_cast<float>(v);
    uint32_t bits;
    std::memcpy(&bits, &f, 4);
    put_tag(value, 2, 5);
    put_le(value, bits, 4);
    put_bytes(summary, 1, value);
  }
  std::string e = event_head(wall_time, step);
  put_bytes(e, 5, summary);
  return e;
}

std::string tb_event_session_start(double wall_time, int64_t step) {
  std::string log;
  put_tag(log, 1, 0);
  put_varint(log, 1);  // SessionLog.START
  std::string e = event_head(wall_time, step);
  put_bytes(e, 7, log);
  return e;
}

std::string tb_event_file_name(int64_t unix_seconds, const std::string& hostname) {
  return "events.out.tfevents." + std::to_string(unix_seconds) + "." + hostname;
}

// ---- TensorBoardWriter ----

TensorBoardWriter::TensorBoardWriter(const std::string& dir) : TensorBoardWriter(dir, Options{}) {}

TensorBoardWriter::TensorBoardWriter(const std::string& dir, const Options& o) : fixed_time_(o.wall_time) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  TEMPER_CHECK(!ec) << dir << ": cannot create directory (" << ec.message() << ")";
  std::string host = o.hostname;
  if (host.empty()) {
    char buf[256] = {};
    host = ::gethostname(buf, sizeof(buf) - 1) == 0 && buf[0] ? buf : "localhost";
  }
  for (char& c : host)
    if (c == '/' || c == '\0') c = '_';
  const double t0 = now();
  const std::string base = (fs::path(dir) / tb_event_file_name(static_cast<int64_t>(std::floor(t0)), host)).string();
  // Never append to another writer's file: a second file in the same second gets a suffix.
  for (int attempt = 0; fd_ < 0; ++attempt) {
    path_ = attempt == 0 ? base : base + "." + std::to_string(::getpid()) + "." + std::to_string(attempt);
    fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0644);
    TEMPER_CHECK(fd_ >= 0 || (errno == EEXIST && attempt < 100))
        << path_ << ": cannot create the TensorBoard event file (" << std::strerror(errno) << ")";
  }
  append(tb_event_file_version(t0));
  if (o.resumed_from_step) append(tb_event_session_start(t0, *o.resumed_from_step + 1));
}

TensorBoardWriter::~TensorBoardWriter() {
  if (fd_ >= 0) ::close(fd_);
}

double TensorBoardWriter::now() const {
  if (fixed_time_) return *fixed_time_;
  using namespace std::chrono;
  return duration_cast<microseconds>(system_clock::now().time_since_epoch()).count() * 1e-6;
}

void TensorBoardWriter::append(const std::string& event) {
  const std::string rec = tfrecord_frame(event);
  const char* p = rec.data();
  size_t left = rec.size();
  while (left > 0) {
    ssize_t n = ::write(fd_, p, left);
    if (n < 0 && errno == EINTR) continue;
    TEMPER_CHECK(n > 0) << path_ << ": write failed (" << std::strerror(errno) << ")";
    p += n;
    left -= static_cast<size_t>(n);
  }
}

void TensorBoardWriter::write(int64_t step, const std::string& kind, const MetricValues& values) {
  if (values.empty()) return;
  MetricValues tagged;
  tagged.reserve(values.size());
  for (const auto& [name, v] : values) tagged.emplace_back(kind + "/" + name, v);
  append(tb_event_scalars(now(), step, tagged));
}

void TensorBoardWriter::flush() {
  TEMPER_CHECK(::fsync(fd_) == 0) << path_ << ": fsync failed (" << std::strerror(errno) << ")";
}

}  // namespace temper::report
