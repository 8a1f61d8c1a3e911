// TensorBoard event writer: CRC-32C vectors, TFRecord framing, and Event bytes against goldens made with
// the pinned tensorboard 2.19.0 / protobuf 7.36.2 (.venv): event_pb2.Event(...).SerializeToString() and
// tensorboard.summary.writer.record_writer.RecordWriter over io.BytesIO (commands in each test).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include "common/scratch.h"
#include "temper/report/tensorboard.h"

namespace temper::report {
namespace {

std::string hex(const std::string& s) {
  static const char* d = "0123456789abcdef";
  std::string o;
  for (unsigned char c : s) {
    o += d[c >> 4];
    o += d[c & 15];
  }
  return o;
}

TEST(Crc32c, StandardVectors) {
  EXPECT_EQ(crc32c("123456789", 9), 0xE3069283u);
  EXPECT_EQ(crc32c("", 0), 0u);
  // RFC 3720 (iSCSI) B.4: 32 bytes of zeros, of 0xFF, and 0..31 ascending.
  std::string zeros(32, '\0'), ones(32, '\xff'), inc(32, '\0');
  for (int i = 0; i < 32; ++i) inc[i] = static_cast<char>(i);
  EXPECT_EQ(crc32c(zeros.data(), 32), 0x8A9136AAu);
  EXPECT_EQ(crc32c(ones.data(), 32), 0x62A8AB43u);
  EXPECT_EQ(crc32c(inc.data(), 32), 0x46DD794Eu);
  // Incremental = one shot.
  EXPECT_EQ(crc32c_extend(crc32c("1234", 4), "56789", 5), 0xE3069283u);
}

TEST(Crc32c, Mask) {
  // TensorFlow's masked_crc32c: ((crc >> 15) | (crc << 17)) + 0xa282ead8, mod 2^32.
  EXPECT_EQ(crc32c_mask(0), 0xa282ead8u);
  EXPECT_EQ(crc32c_mask(0xE3069283u), ((0xE3069283u >> 15) | (0xE3069283u << 17)) + 0xa282ead8u);
  // tensorboard.compat.tensorflow_stub.pywrap_tensorflow.masked_crc32c(b'123456789') == 0xc78ab0e5
  EXPECT_EQ(crc32c_mask(0xE3069283u), 0xC78AB0E5u);
}

// .venv/bin/python: e = event_pb2.Event(wall_time=1.5, step=3); v = e.summary.value.add();
// v.tag = 'train/loss'; v.simple_value = 0.25; RecordWriter(b).write(e.SerializeToString()); b.getvalue().hex()
TEST(TensorBoard, ScalarRecordGolden) {
  const std::string event = tb_event_scalars(1.5, 3, {{"train/loss", 0.25}});
  EXPECT_EQ(hex(event), "09000000000000f83f10032a130a110a0a747261696e2f6c6f7373150000803e");
  EXPECT_EQ(hex(tfrecord_frame(event)),
            "200000000000000029eda950"
            "09000000000000f83f10032a130a110a0a747261696e2f6c6f7373150000803e"
            "43301b92");
}

// event_pb2.Event(wall_time=1.5, file_version='brain.Event:2'), framed by RecordWriter.
TEST(TensorBoard, FileVersionRecordGolden) {
  EXPECT_EQ(hex(tfrecord_frame(tb_event_file_version(1.5))),
            "1800000000000000a37f4b2209000000000000f83f1a0d627261696e2e4576656e743a322a28646c");
}

// Event(wall_time=1.5, step=-2) with values ('eval/acc', 0.0) and ('train/x', nan): a negative step
// is a 10-byte varint; a zero simple_value is still written (oneof); NaN is the quiet NaN 0x7fc00000.
// Event(wall_time=1.5, step=7, session_log=SessionLog(status=START)): field 7.
TEST(TensorBoard, EdgeCaseEventsGolden) {
  EXPECT_EQ(hex(tb_event_scalars(1.5, -2, {{"eval/acc", 0.0}, {"train/x", std::nan("")}})),
            "09000000000000f83f10feffffffffffffffff012a210a0f0a086576616c2f61636315000000000a0e0a07747261696e2f78150000c07f");
  EXPECT_EQ(hex(tb_event_session_start(1.5, 7)), "09000000000000f83f10073a020801");
}

TEST(TensorBoard, WriterFileLayout) {
  const std::string dir = test::scratch_path("report_tb", "layout");
  std::filesystem::remove_all(dir);
  TensorBoardWriter::Options o;
  o.wall_time = 1.5;
  o.hostname = "host";
  std::string first_path;
  {
    TensorBoardWriter w(dir, o);
    first_path = w.path();
    EXPECT_EQ(std::filesystem::path(w.path()).filename().string(), "events.out.tfevents.1.host");
    w.write(3, "train", {{"loss", 0.25}});
    w.flush();
  }
  std::ifstream in(first_path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  EXPECT_EQ(hex(ss.str()), hex(tfrecord_frame(tb_event_file_version(1.5)) + tfrecord_frame(tb_event_scalars(1.5, 3, {{"train/loss", 0.25}}))));
  // A second writer in the same second gets its own file, and a resume starts with SessionLog START.
  o.resumed_from_step = 2;
  TensorBoardWriter w2(dir, o);
  EXPECT_NE(w2.path(), first_path);
  EXPECT_NE(std::filesystem::path(w2.path()).filename().string().find("events.out.tfevents.1.host."), std::string::npos);
  std::ifstream in2(w2.path(), std::ios::binary);
  std::stringstream ss2;
  ss2 << in2.rdbuf();
  EXPECT_EQ(hex(ss2.str()), hex(tfrecord_frame(tb_event_file_version(1.5)) + tfrecord_frame(tb_event_session_start(1.5, 3))));
}

}  // namespace
}  // namespace temper::report
