// TensorBoard event files without TensorFlow or protobuf: TFRecord framing (uint64 length, masked
// CRC32C of the length, payload, masked CRC32C of the payload; tensorflow/core/lib/io/record_writer)
// around hand-encoded tensorflow.Event messages (event.proto / summary.proto): wall_time (1, double),
// step (2, int64), file_version (3, "brain.Event:2"), summary (5) of Value{tag (1), simple_value (2)},
// session_log (7). Scalars only: no histograms, images or text.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "temper/report/metrics_sink.h"

namespace temper::report {

// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), as TFRecord uses; crc32c("123456789") = 0xE3069283.
uint32_t crc32c(const void* data, size_t n);
uint32_t crc32c_extend(uint32_t crc, const void* data, size_t n);
// TFRecord's mask: ((crc >> 15) | (crc << 17)) + 0xa282ead8.
uint32_t crc32c_mask(uint32_t crc);

// One TFRecord: le64 length, le32 masked crc of those 8 bytes, payload, le32 masked crc of payload.
std::string tfrecord_frame(std::string_view payload);

// Serialized tensorflow.Event messages, byte-identical to protobuf's (proto3: a zero wall_time or
// step is left out; simple_value sits in a oneof and is always written).
std::string tb_event_file_version(double wall_time);
std::string tb_event_scalars(double wall_time, int64_t step, const MetricValues& tagged_values);
// SessionLog{status: START} at `step`: TensorBoard then drops earlier-written events with step >= step.
std::string tb_event_session_start(double wall_time, int64_t step);

// "events.out.tfevents.<unix seconds>.<hostname>"
std::string tb_event_file_name(int64_t unix_seconds, const std::string& hostname);

// A MetricsSink writing one Event per row (tag "<kind>/<name>") into a new event file in `dir`.
//
// Resume: a resumed run starts a new file (TensorBoard reads every event file of a directory, in name
// order, i.e. by creation time). The old file still holds the rows written after the checkpoint, and
// the resumed run writes those steps again: without help TensorBoard shows both (for file_version 2
// files its loader does not purge on out-of-order steps). Passing resumed_from_step = N makes the new
// file begin with SessionLog{START} at step N + 1, on which TensorBoard's loader (EventAccumulator,
// purge_orphaned_data on by default) drops every event already loaded with step > N, as for a
// restarted TensorFlow job; tools/ref/check_tensorboard.py checks this. The files are never rewritten.
// (Checked with the Python loader of tensorboard 2.19; the optional Rust data server is not checked.)
class TensorBoardWriter : public MetricsSink {
 public:
  struct Options {
    std::optional<int64_t> resumed_from_step;  // see above
    std::optional<double> wall_time;           // tests: a fixed wall_time for every event (and the name)
    std::string hostname;                      // default: gethostname()
  };
  explicit TensorBoardWriter(const std::string& dir);
  TensorBoardWriter(const std::string& dir, const Options& o);
  ~TensorBoardWriter() override;
  TensorBoardWriter(const TensorBoardWriter&) = delete;
  TensorBoardWriter& operator=(const TensorBoardWriter&) = delete;

  void write(int64_t step, const std::string& kind, const MetricValues& values) override;
  void flush() override;  // fsync
  const std::string& path() const { return path_; }

 private:
  void append(const std::string& event);
  double now() const;
  std::string path_;
  int fd_ = -1;
  std::optional<double> fixed_time_;
};

}  // namespace temper::report
