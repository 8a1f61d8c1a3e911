// GGUF files: the reader against a file written by llama.cpp's gguf-py (every metadata value type,
// nested arrays, F16/BF16/Q8_0/Q4_0/Q4_1 blocks and their numpy dequantization, dimension order),
// Q8_0/F16/BF16 encoding bit-exact with gguf-py, every malformed-file error (crafted byte by byte),
// truncation and byte-flip sweeps that must throw temper::Error and never crash, and the writer
// (round trip of every value type and tensor type, alignment, atomic write, errors).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>

#include "common/test_data.h"
#include "common/scratch.h"
#include "temper/core/error.h"
#include "temper/io/gguf_file.h"
#include "temper/io/gguf_quant.h"
#include "temper/io/gguf_writer.h"

using namespace temper;
using namespace temper::io;
namespace fs = std::filesystem;

namespace {

std::string tmp_path(const std::string& name) { return test::scratch_path("gguf", name); }

// Files beside `path` named PATH.tmp... (write_file_atomic's temporaries): none should be left after a write.
int temporaries_beside(const std::string& path) {
  const std::string prefix = fs::path(path).filename().string() + ".tmp";
  int n = 0;
  for (const auto& e : fs::directory_iterator(fs::path(path).parent_path()))
    n += e.path().filename().string().rfind(prefix, 0) == 0;
  return n;
}
using test::expect_error;

// Little-endian GGUF bytes, built field by field so that each malformed case is explicit.
struct Bytes {
  std::string b;
  Bytes& u8(uint8_t v) { return raw(&v, 1); }
  Bytes& u32(uint32_t v) { return raw(&v, 4); }
  Bytes& u64(uint64_t v) { return raw(&v, 8); }
  Bytes& str(const std::string& s) {
    u64(s.size());
    b += s;
    return *this;
  }
  Bytes& raw(const void* p, size_t n) {
    b.append(static_cast<const char*>(p), n);
    return *this;
  }
  Bytes& header(uint64_t n_tensors, uint64_t n_kv, uint32_t version = 3) {
    b += "GGUF";
    u32(version);
    u64(n_tensors);
    return u64(n_kv);
  }
  Bytes& kv_u32(const std::string& key, uint32_t v) { return str(key).u32(4).u32(v); }
  // Tensor info: name, dims (GGUF order), type, offset.
  Bytes& info(const std::string& name, std::vector<uint64_t> ne, uint32_t type, uint64_t offset) {
    str(name).u32(static_cast<uint32_t>(ne.size()));
    for (uint64_t d : ne) u64(d);
    return u32(type).u64(offset);
  }
  Bytes& pad(size_t alignment = 32) {
    while (b.size() % alignment) b += '\0';
    return *this;
  }
  Bytes& zeros(size_t n) {
    b.append(n, '\0');
    return *this;
  }
  std::string write(const std::string& name) const {
    std::string p = tmp_path(name);
    std::ofstream(p, std::ios::binary) << b;
    return p;
  }
};

std::string golden_path() {
  return test::test_data("gguf/quant_goldens.gguf");
}

std::vector<float> as_vector(const Tensor& t) {
  return std::vector<float>(t.data<float>(), t.data<float>() + t.numel());
}

}  // namespace

TEST(GgufFile, ReadsEveryValueTypeWrittenByGgufPy) {
  GgufFile f = GgufFile::open(golden_path());
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.alignment(), 32u);
  EXPECT_EQ(f.data_offset() % 32, 0u);
  EXPECT_EQ(f.get_str("general.architecture"), "testarch");
  EXPECT_EQ(f.at("test.u8"), GgufValue::u8(200));
  EXPECT_EQ(f.at("test.i8"), GgufValue::i8(-100));
  EXPECT_EQ(f.at("test.u16"), GgufValue::u16(60000));
  EXPECT_EQ(f.at("test.i16"), GgufValue::i16(-30000));
  EXPECT_EQ(f.at("test.u32"), GgufValue::u32(4000000000u));
  EXPECT_EQ(f.at("test.i32"), GgufValue::i32(-2000000000));
  EXPECT_EQ(f.at("test.f32"), GgufValue::f32(0.15625f));
  EXPECT_EQ(f.at("test.bool"), GgufValue::boolean(true));
  EXPECT_EQ(f.at("test.str"), GgufValue::string("h\xc3\xa9llo w\xc3\xb6rld \xe2\x9c\x93"));
  EXPECT_EQ(f.at("test.u64"), GgufValue::u64(18000000000000000000ull));
  EXPECT_EQ(f.at("test.i64"), GgufValue::i64(-9000000000000000000ll));
  EXPECT_EQ(f.at("test.f64"), GgufValue::f64(2.718281828459045));
  EXPECT_EQ(f.get_i32_array("test.arr_i32"), (std::vector<int32_t>{1, -2, 3}));
  EXPECT_EQ(f.get_i32_array("test.arr_u8"), (std::vector<int32_t>{1, 2, 255}));
  EXPECT_EQ(f.at("test.arr_u8").elem_type(), GgufValueType::u8);
  EXPECT_EQ(f.get_f32_array("test.arr_f32"), (std::vector<float>{0.5f, -1.25f}));
  EXPECT_EQ(f.at("test.arr_bool"),
            GgufValue::array(GgufValueType::boolean,
                             {GgufValue::boolean(true), GgufValue::boolean(false), GgufValue::boolean(true)}));
  EXPECT_EQ(f.get_str_array("test.arr_str"), (std::vector<std::string>{"a", "", "\xc3\xbc\xe2\x82\xac"}));
  const GgufValue& nested = f.at("test.arr_nested");
  EXPECT_EQ(nested.elem_type(), GgufValueType::array);
  ASSERT_EQ(nested.size(), 3u);
  EXPECT_EQ(nested.items()[0], GgufValue::i32_array({1, 2}));
  EXPECT_EQ(nested.items()[1], GgufValue::i32_array({3}));
  EXPECT_EQ(nested.items()[2], GgufValue::i32_array({4, 5, 6}));
  // Integer getters convert across integer types when the value fits.
  EXPECT_EQ(f.get_u32("test.u8"), 200u);
  EXPECT_EQ(f.get_i64("test.u32"), 4000000000ll);
  EXPECT_EQ(f.get_u64("test.u64"), 18000000000000000000ull);
  EXPECT_EQ(f.get_i32("test.i16"), -30000);
  EXPECT_FLOAT_EQ(f.get_f32("test.f64"), 2.7182817f);
  EXPECT_EQ(f.get_u32_or("absent.key", 7u), 7u);
  EXPECT_TRUE(f.get_bool("test.bool"));
}

TEST(GgufFile, TypedGettersNameKeyAndType) {
  GgufFile f = GgufFile::open(golden_path());
  expect_error([&] { f.get_u32("test.str"); }, {"quant_goldens.gguf", "'test.str'", "has type string", "u32"});
  expect_error([&] { f.get_u32("test.u64"); }, {"'test.u64'", "does not fit u32"});
  expect_error([&] { f.get_u32("test.i8"); }, {"'test.i8'", "= -100", "does not fit u32"});
  expect_error([&] { f.get_i32("test.u32"); }, {"'test.u32'", "does not fit i32"});
  expect_error([&] { f.get_f32("test.i32"); }, {"'test.i32'", "has type i32", "float"});
  expect_error([&] { f.get_str("test.u8"); }, {"'test.u8'", "has type u8", "expected string"});
  expect_error([&] { f.get_bool("test.u8"); }, {"'test.u8'", "expected bool"});
  expect_error([&] { f.get_str_array("test.arr_i32"); }, {"'test.arr_i32'", "array of 3 i32", "array of string"});
  expect_error([&] { f.get_i32_array("test.arr_str"); }, {"'test.arr_str[0]'", "has type string"});
  expect_error([&] { f.get_str_array("test.str"); }, {"'test.str'", "has type string", "expected an array"});
  expect_error([&] { f.get_str("no.such.key"); }, {"quant_goldens.gguf", "missing metadata key 'no.such.key'"});
  expect_error([&] { f.get_u32_or("test.str", 1); }, {"'test.str'", "has type string"});
}

TEST(GgufFile, TensorInfosAndDimensionOrder) {
  GgufFile f = GgufFile::open(golden_path());
  const GgufTensorInfo& cube = f.tensor("cube");
  EXPECT_EQ(cube.ne, (std::vector<int64_t>{4, 3, 2}));  // GGUF order: fastest first
  EXPECT_EQ(cube.shape(), Shape({2, 3, 4}));
  Tensor c = f.view("cube");
  EXPECT_EQ(c.shape(), Shape({2, 3, 4}));
  for (int i = 0; i < 24; ++i) EXPECT_EQ(c.data<float>()[i], static_cast<float>(i));
  Tensor ids = f.view("ids");
  EXPECT_EQ(ids.dtype(), DType::i32);
  EXPECT_EQ(ids.data<int32_t>()[2], 49151);
  EXPECT_EQ(f.tensor("x.Q4_1").type, GgmlType::q4_1);
  EXPECT_EQ(f.tensor("x.Q4_1").shape(), Shape({4, 96}));
  QuantView q = f.quant_view("x.Q4_1");
  EXPECT_EQ(q.rows, 4);
  EXPECT_EQ(q.cols, 96);
  EXPECT_EQ(q.row_bytes, 3u * 20u);
  expect_error([&] { f.view("x.Q8_0"); }, {"'x.Q8_0'", "Q8_0", "no plain dtype view"});
  expect_error([&] { f.tensor("nope"); }, {"quant_goldens.gguf", "no tensor named 'nope'"});
  EXPECT_EQ(f.find_tensor("nope"), nullptr);
}

TEST(GgufQuant, DequantizeMatchesGgufPyBitExactly) {
  GgufFile f = GgufFile::open(golden_path());
  for (const char* t : {"F16", "BF16", "Q8_0", "Q4_0", "Q4_1"}) {
    std::string name = std::string("x.") + t;
    Tensor got = f.dequantize(name);
    Tensor want = f.view(name + ".deq");
    ASSERT_EQ(got.shape(), want.shape()) << name;
    int64_t bad = 0, first = -1;
    for (int64_t i = 0; i < got.numel(); ++i)
      if (std::memcmp(got.data<float>() + i, want.data<float>() + i, 4) != 0 && bad++ == 0) first = i;
    EXPECT_EQ(bad, 0) << name << ": " << bad << " elements differ, first at " << first << " (got "
                      << got.data<float>()[first] << ", want " << want.data<float>()[first] << ")";
  }
  // Row-range decoding through the raw-block view gives the same values.
  QuantView q = f.quant_view("x.Q4_0");
  std::vector<float> rows(2 * 96);
  q.dequantize_rows(1, 3, rows.data());
  Tensor all = f.dequantize("x.Q4_0");
  EXPECT_EQ(0, std::memcmp(rows.data(), all.data<float>() + 96, rows.size() * 4));
  expect_error([&] { q.dequantize_rows(3, 5, rows.data()); }, {"rows [3, 5)", "4 rows"});
}

TEST(GgufQuant, EncodingMatchesGgufPyBitExactly) {
  // Q8_0 is llama.cpp's reference rounding (roundf: ties away from zero, exercised by row 1).
  GgufFile f = GgufFile::open(golden_path());
  Tensor x = f.view("x");
  for (GgmlType t : {GgmlType::f16, GgmlType::bf16, GgmlType::q8_0}) {
    QuantView want = f.quant_view(std::string("x.") + std::string(ggml_type_name(t)));
    std::vector<uint8_t> got(want.row_bytes);
    for (int64_t r = 0; r < want.rows; ++r) {
      quantize_row(t, x.data<float>() + r * 96, got.data(), 96);
      EXPECT_EQ(0, std::memcmp(got.data(), want.row(r), want.row_bytes)) << ggml_type_name(t) << " row " << r;
    }
  }
  float bad[32] = {};
  bad[5] = NAN;
  uint8_t out[34];
  expect_error([&] { quantize_row(GgmlType::q8_0, bad, out, 32); }, {"Q8_0", "non-finite", "element 5"});
  expect_error([&] { quantize_row(GgmlType::q8_0, bad, out, 31); }, {"Q8_0", "31 elements", "block size 32"});
  expect_error([&] { quantize_row(GgmlType::q4_1, bad, out, 32); }, {"cannot encode", "Q4_1"});
  expect_error([&] { dequantize_row(GgmlType::q4_k, out, bad, 256); }, {"cannot decode", "Q4_K"});
}

TEST(GgufQuant, TypeTable) {
  EXPECT_EQ(ggml_row_bytes(GgmlType::q4_1, 576), 18u * 20u);
  EXPECT_EQ(ggml_row_bytes(GgmlType::q8_0, 576), 18u * 34u);
  EXPECT_EQ(ggml_row_bytes(GgmlType::q6_k, 512), 2u * 210u);
  EXPECT_EQ(ggml_row_bytes(GgmlType::bf16, 3), 6u);
  EXPECT_EQ(ggml_type_info(4u), nullptr);  // Q4_2, removed from ggml
  EXPECT_EQ(ggml_type_info(36u), nullptr);
  expect_error([] { ggml_row_bytes(GgmlType::q4_0, 40); }, {"40 elements", "Q4_0", "32"});
}

// ---------------------------------------------------------------------------------------------
// Malformed files: each error names the file and the key or tensor, the expected and the actual.

TEST(GgufFile, MalformedHeaders) {
  expect_error([] { GgufFile::open(tmp_path("missing.gguf")); }, {"missing.gguf", "cannot open"});
  expect_error([] { GgufFile::open(Bytes().raw("GGUF\3\0\0\0", 8).write("short.gguf")); },
               {"short.gguf", "8 bytes", "too short"});
  {
    Bytes b;
    b.header(0, 0);
    b.b[0] = 'X';
    expect_error([&] { GgufFile::open(b.write("magic.gguf")); }, {"magic.gguf", "bad magic \"XGUF\"", "\"GGUF\""});
  }
  expect_error([] { GgufFile::open(Bytes().header(0, 0, 1).write("v1.gguf")); },
               {"v1.gguf", "unsupported GGUF version 1", "2, 3"});
  expect_error([] { GgufFile::open(Bytes().header(0, 0, 4).write("v4.gguf")); }, {"v4.gguf", "version 4"});
  expect_error([] { GgufFile::open(Bytes().header(0, 0, 0x03000000).write("be.gguf")); }, {"be.gguf", "big-endian"});
  expect_error([] { GgufFile::open(Bytes().header(0, 1ull << 60).write("nkv.gguf")); },
               {"nkv.gguf", "metadata KVs", "truncated or corrupt"});
  expect_error([] { GgufFile::open(Bytes().header(1ull << 60, 0).write("nt.gguf")); },
               {"nt.gguf", "tensors", "truncated or corrupt"});
  // Valid, empty: v2 and v3.
  EXPECT_EQ(GgufFile::open(Bytes().header(0, 0, 2).write("v2.gguf")).version(), 2u);
  EXPECT_TRUE(GgufFile::open(Bytes().header(0, 0).write("empty.gguf")).tensors().empty());
}

TEST(GgufFile, MalformedMetadata) {
  expect_error([] { GgufFile::open(Bytes().header(0, 1).u64(100).raw("ab", 2).zeros(16).write("key.gguf")); },
               {"key.gguf", "truncated", "metadata KV #0", "key length", "needs 100 bytes", "only 18 remain"});
  expect_error([] { GgufFile::open(Bytes().header(0, 1).str("a").u32(8).u64(1000).raw("xy", 2).write("sv.gguf")); },
               {"sv.gguf", "metadata key 'a'", "string length", "needs 1000 bytes"});
  expect_error([] { GgufFile::open(Bytes().header(0, 1).str("a").u32(13).u32(0).write("vt.gguf")); },
               {"vt.gguf", "metadata key 'a'", "unknown value type 13"});
  expect_error([] { GgufFile::open(Bytes().header(0, 1).str("a").u32(9).u32(99).u64(1).write("at.gguf")); },
               {"at.gguf", "metadata key 'a'", "unknown array item type 99"});
  expect_error([] { GgufFile::open(Bytes().header(0, 1).str("arr").u32(9).u32(4).u64(1000).u32(1).write("al.gguf")); },
               {"al.gguf", "metadata key 'arr'", "array of 1000 u32", "4 bytes remain"});
  expect_error(
      [] { GgufFile::open(Bytes().header(0, 1).str("s").u32(9).u32(8).u64(2).str("ok").u64(50).write("as.gguf")); },
      {"as.gguf", "metadata key 's'", "string length", "needs 50 bytes"});
  {
    Bytes b;
    b.header(0, 1).str("deep").u32(9);
    for (int i = 0; i < 20; ++i) b.u32(9).u64(1);
    b.u32(4).u64(0);
    expect_error([&] { GgufFile::open(b.write("deep.gguf")); }, {"deep.gguf", "'deep'", "nested more than 8"});
  }
  expect_error([] { GgufFile::open(Bytes().header(0, 2).kv_u32("k", 1).kv_u32("k", 2).write("dup.gguf")); },
               {"dup.gguf", "duplicate metadata key 'k'"});
  expect_error([] { GgufFile::open(Bytes().header(0, 1).str("").u32(4).u32(1).write("ek.gguf")); },
               {"ek.gguf", "empty key"});
  expect_error([] { GgufFile::open(Bytes().header(0, 1).str("b").u32(7).u8(2).write("bool.gguf")); },
               {"bool.gguf", "metadata key 'b'", "is 2, expected 0 or 1"});
  expect_error([] { GgufFile::open(Bytes().header(0, 1).str("general.alignment").u32(5).u32(32).write("ga.gguf")); },
               {"ga.gguf", "'general.alignment'", "has type i32", "expected u32"});
  expect_error([] { GgufFile::open(Bytes().header(0, 1).kv_u32("general.alignment", 48).write("ga2.gguf")); },
               {"ga2.gguf", "'general.alignment'", "is 48", "power of two"});
  expect_error([] { GgufFile::open(Bytes().header(0, 1).kv_u32("general.alignment", 0).write("ga3.gguf")); },
               {"ga3.gguf", "is 0", "power of two"});
}

TEST(GgufFile, MalformedTensorInfos) {
  auto one = [](const std::string& file, const std::string& name, std::vector<uint64_t> ne, uint32_t type,
                uint64_t offset, size_t data_bytes) {
    Bytes b;
    b.header(1, 0).info(name, std::move(ne), type, offset).pad().zeros(data_bytes);
    return b.write(file);
  };
  // Sanity: a valid one-tensor file.
  EXPECT_EQ(GgufFile::open(one("ok.gguf", "w", {64, 2}, 8, 0, 2 * 68)).tensor("w").nbytes, 136u);
  expect_error(
      [&] {
        GgufFile::open(one("nd.gguf", "w", {1, 1, 1, 1, 1}, 0, 0, 4));
      },
      {"nd.gguf", "tensor 'w'", "n_dims 5", "at most 4"});
  expect_error([&] { GgufFile::open(one("ty.gguf", "w", {32}, 4, 0, 64)); },
               {"ty.gguf", "tensor 'w'", "unknown ggml type code 4"});
  expect_error([&] { GgufFile::open(one("ty2.gguf", "w", {32}, 1000, 0, 64)); },
               {"ty2.gguf", "tensor 'w'", "unknown ggml type code 1000"});
  expect_error(
      [&] {
        GgufFile::open(one("blk.gguf", "w", {40, 2}, 8, 0, 200));
      },
      {"blk.gguf", "tensor 'w'", "Q8_0", "ne[0] = 40", "block size 32"});
  expect_error([&] { GgufFile::open(one("mis.gguf", "w", {8}, 0, 4, 64)); },
               {"mis.gguf", "tensor 'w'", "offset 4", "alignment 32"});
  expect_error(
      [&] {
        GgufFile::open(one("end.gguf", "w", {64, 2}, 8, 0, 100));
      },
      {"end.gguf", "tensor 'w'", "[0, 136)", "Q8_0", "past the end", "100-byte data section"});
  expect_error([&] { GgufFile::open(one("end2.gguf", "w", {8}, 0, 1ull << 62, 64)); },
               {"end2.gguf", "tensor 'w'", "past the end"});
  expect_error(
      [&] {
        GgufFile::open(one("ovf.gguf", "w", {1ull << 40, 1ull << 40}, 0, 0, 0));
      },
      {"ovf.gguf", "tensor 'w'", "dimension 1", "overflow"});
  expect_error([&] { GgufFile::open(one("neg.gguf", "w", {~0ull}, 0, 0, 0)); }, {"neg.gguf", "tensor 'w'", "overflow"});
  expect_error(
      [&] {
        GgufFile::open(one("sz.gguf", "w", {1ull << 61, 2}, 0, 0, 0));
      },
      {"sz.gguf", "tensor 'w'", "byte size overflows"});
  expect_error([&] { GgufFile::open(one("name.gguf", std::string(64, 'n'), {8}, 0, 0, 32)); },
               {"name.gguf", "64 bytes", "limit is 63"});
  expect_error([&] { GgufFile::open(one("en.gguf", "", {8}, 0, 0, 32)); }, {"en.gguf", "empty name"});
  {
    // 16 f32 = 64 bytes each.
    Bytes b;
    b.header(2, 0).info("a", {16}, 0, 0).info("b", {16}, 0, 64).pad().zeros(128);
    EXPECT_EQ(GgufFile::open(b.write("two.gguf")).tensors().size(), 2u);
    Bytes o;
    o.header(3, 0).info("a", {16}, 0, 0).info("c", {16}, 0, 96).info("b", {16}, 0, 64).pad().zeros(160);
    expect_error([&] { GgufFile::open(o.write("ovl.gguf")); },
                 {"ovl.gguf", "tensors 'b' [64, 128)", "'c' [96, 160)", "overlap"});
    Bytes d;
    d.header(2, 0).info("a", {16}, 0, 0).info("a", {16}, 0, 64).pad().zeros(128);
    expect_error([&] { GgufFile::open(d.write("dupt.gguf")); }, {"dupt.gguf", "duplicate tensor 'a'"});
  }
  {
    Bytes b;
    b.header(1, 0).str("w").u32(4).u64(8).u64(8).u32(0);  // cut inside the third dim
    expect_error([&] { GgufFile::open(b.write("cut.gguf")); }, {"cut.gguf", "truncated", "tensor 'w'", "dimension"});
  }
  {
    // A k-quant tensor opens (metadata stays usable) but is refused by name when decoded.
    GgufFile f = GgufFile::open(one("k.gguf", "wk", {256}, 12, 0, 160));
    EXPECT_EQ(f.tensor("wk").nbytes, 144u);
    expect_error([&] { f.dequantize("wk"); }, {"k.gguf", "tensor 'wk'", "Q4_K", "cannot decode", "Q4_1"});
    EXPECT_EQ(f.quant_view("wk").row_bytes, 144u);
  }
}

// Every prefix of a valid file either opens (the cut only removed trailing padding) or throws
// temper::Error; flipping any byte of the header and infos never crashes either.
TEST(GgufFile, TruncationAndByteFlipSweepsNeverCrash) {
  GgufWriter w;
  w.add_kv("general.architecture", GgufValue::string("llama"));
  w.add_kv("a.strs", GgufValue::string_array({"x", "yy", ""}));
  w.add_kv("a.nested", GgufValue::array(GgufValueType::array, {GgufValue::i32_array({1, 2})}));
  std::vector<float> data(64 * 3, 0.5f);
  w.add_tensor("w.q8", Shape({3, 64}), GgmlType::q8_0, data.data());
  w.add_tensor("w.f32", Shape({5}), GgmlType::f32, data.data());
  std::string path = tmp_path("sweep.gguf");
  w.write(path);
  std::string full;
  {
    std::ifstream in(path, std::ios::binary);
    full.assign(std::istreambuf_iterator<char>(in), {});
  }
  uint64_t data_end = 0;
  {
    GgufFile f = GgufFile::open(path);
    for (const GgufTensorInfo& t : f.tensors()) data_end = std::max(data_end, f.data_offset() + t.offset + t.nbytes);
  }
  std::string cut = tmp_path("sweep_cut.gguf");
  int opened = 0;
  for (size_t n = 0; n < full.size(); ++n) {
    std::ofstream(cut, std::ios::binary | std::ios::trunc) << full.substr(0, n);
    try {
      GgufFile f = GgufFile::open(cut);
      EXPECT_GE(n, data_end) << "a prefix of " << n << " bytes opened although tensor data ends at " << data_end;
      ++opened;
    } catch (const Error&) {
    }
  }
  EXPECT_EQ(opened, static_cast<int>(full.size() - data_end));
  GgufFile good = GgufFile::open(path);
  for (size_t i = 0; i < good.data_offset(); ++i) {
    std::string flipped = full;
    flipped[i] = static_cast<char>(flipped[i] ^ 0x5a);
    std::ofstream(cut, std::ios::binary | std::ios::trunc) << flipped;
    try {
      GgufFile f = GgufFile::open(cut);
      for (const GgufTensorInfo& t : f.tensors())
        if (ggml_type_dequantizable(t.type)) f.dequantize(t.name);
    } catch (const Error&) {
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Writer

TEST(GgufWriter, RoundTripsEveryValueTypeAndTensorType) {
  std::vector<std::pair<std::string, GgufValue>> kv = {
      {"general.architecture", GgufValue::string("llama")},
      {"t.u8", GgufValue::u8(255)},
      {"t.i8", GgufValue::i8(-128)},
      {"t.u16", GgufValue::u16(65535)},
      {"t.i16", GgufValue::i16(-32768)},
      {"t.u32", GgufValue::u32(4294967295u)},
      {"t.i32", GgufValue::i32(-5)},
      {"t.u64", GgufValue::u64(~0ull)},
      {"t.i64", GgufValue::i64(-(1ll << 62))},
      {"t.f32", GgufValue::f32(1e-5f)},
      {"t.f64", GgufValue::f64(-1e300)},
      {"t.bool", GgufValue::boolean(false)},
      {"t.str", GgufValue::string(std::string("nul\0inside", 10))},
      {"t.empty_arr", GgufValue::array(GgufValueType::u16, {})},
      {"t.strs", GgufValue::string_array({"<|im_start|>", "\xc4\xa0t", ""})},
      {"t.f32s", GgufValue::f32_array({1.5f, -0.0f})},
      {"t.nested", GgufValue::array(GgufValueType::array, {GgufValue::string_array({"a"}), GgufValue::i32_array({})})},
  };
  for (uint32_t alignment : {32u, 64u}) {
    GgufWriter w(alignment);
    for (auto& [k, v] : kv) w.add_kv(k, v);
    std::vector<float> x(4 * 64);
    for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.37f * static_cast<float>(i)) * (1.0f + (i % 64) * 0.1f);
    w.add_tensor("f32", Shape({4, 64}), GgmlType::f32, x.data());
    w.add_tensor("f16", Shape({4, 64}), GgmlType::f16, x.data());
    w.add_tensor("bf16", Shape({4, 64}), GgmlType::bf16, x.data());
    w.add_tensor("q8", Shape({4, 64}), GgmlType::q8_0, x.data());
    w.add_tensor("cube", Shape({2, 2, 64}), GgmlType::f32, x.data());
    w.add_tensor("vec", Shape({7}), GgmlType::f32, x.data());
    w.add_tensor("filled", Shape({2, 32}), GgmlType::f32, [](float* d) {
      for (int i = 0; i < 64; ++i) d[i] = static_cast<float>(i);
    });
    GgufFile golden = GgufFile::open(golden_path());
    w.add_tensor_raw("raw.q4_1", Shape({4, 96}), GgmlType::q4_1, golden.quant_view("x.Q4_1").data);
    std::string path = tmp_path("rt" + std::to_string(alignment) + ".gguf");
    w.write(path);
    EXPECT_EQ(temporaries_beside(path), 0);

    GgufFile f = GgufFile::open(path);
    EXPECT_EQ(f.version(), 3u);
    EXPECT_EQ(f.alignment(), alignment);
    EXPECT_EQ(f.get_u32("general.alignment"), alignment);
    for (auto& [k, v] : kv) EXPECT_EQ(f.at(k), v) << k << ": " << f.at(k).to_string();
    EXPECT_EQ(f.metadata().front().first, "general.architecture");  // file order kept
    for (const GgufTensorInfo& t : f.tensors()) EXPECT_EQ(t.offset % alignment, 0u) << t.name;

    EXPECT_EQ(as_vector(f.dequantize("f32")), x);  // exact
    EXPECT_EQ(f.tensor("cube").shape(), Shape({2, 2, 64}));
    EXPECT_EQ(f.tensor("cube").ne, (std::vector<int64_t>{64, 2, 2}));
    EXPECT_EQ(as_vector(f.dequantize("vec")), std::vector<float>(x.begin(), x.begin() + 7));
    EXPECT_EQ(f.dequantize("filled").data<float>()[63], 63.0f);
    Tensor h = f.dequantize("f16"), b = f.dequantize("bf16"), q = f.dequantize("q8");
    for (int64_t blk = 0; blk < 8; ++blk) {
      float amax = 0;
      for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[blk * 32 + j]));
      for (int j = 0; j < 32; ++j) {
        int64_t i = blk * 32 + j;
        float xi = x[i];
        EXPECT_LE(std::fabs(h.data<float>()[i] - xi), std::ldexp(std::fabs(xi), -11) + 1e-7f) << i;  // half ulp
        EXPECT_LE(std::fabs(b.data<float>()[i] - xi), std::ldexp(std::fabs(xi), -8)) << i;
        // Q8_0: half a step of d = amax/127, plus d's own fp16 rounding times |q| <= 127.
        EXPECT_LE(std::fabs(q.data<float>()[i] - xi), amax / 254.0f + amax * std::ldexp(1.0f, -11) + amax * 1e-6f) << i;
      }
    }
    QuantView rq = f.quant_view("raw.q4_1"), gq = golden.quant_view("x.Q4_1");
    EXPECT_EQ(0, std::memcmp(rq.data, gq.data, 4 * rq.row_bytes));
  }
}

TEST(GgufWriter, ErrorsAndAtomicity) {
  GgufWriter w;
  w.add_kv("k", GgufValue::u32(1));
  expect_error([&] { w.add_kv("k", GgufValue::u32(2)); }, {"'k'", "added twice"});
  expect_error([&] { w.add_kv("", GgufValue::u32(2)); }, {"empty"});
  expect_error([&] { w.add_kv("general.alignment", GgufValue::u32(64)); }, {"general.alignment", "32"});
  expect_error([&] { GgufValue::array(GgufValueType::u32, {GgufValue::i32(1)}); }, {"array of u32", "item 0", "i32"});
  expect_error([] { GgufWriter(48); }, {"power of two", "48"});
  std::vector<float> x(128, 1.0f);
  w.add_tensor("a", Shape({2, 64}), GgmlType::f32, x.data());
  expect_error([&] { w.add_tensor("a", Shape({2, 64}), GgmlType::f32, x.data()); }, {"'a'", "added twice"});
  expect_error(
      [&] {
        w.add_tensor("b", Shape({2, 40}), GgmlType::q8_0, x.data());
      },
      {"'b'", "[2, 40]", "not a multiple of the Q8_0 block size 32"});
  expect_error([&] { w.add_tensor(std::string(64, 'n'), Shape({2}), GgmlType::f32, x.data()); }, {"1-63 bytes"});
  expect_error([&] { w.add_tensor("c", Shape({1, 1, 1, 1, 2}), GgmlType::f32, x.data()); }, {"'c'", "rank 5"});
  expect_error([&] { w.add_tensor("d", Shape({32}), GgmlType::q4_0, x.data()); }, {"'d'", "cannot encode", "Q4_0"});
  // A failed write leaves neither the file nor the temporary behind.
  std::vector<float> nan(64, 1.0f);
  nan[40] = NAN;
  w.add_tensor("bad", Shape({2, 32}), GgmlType::q8_0, nan.data());
  std::string path = tmp_path("failed.gguf");
  expect_error([&] { w.write(path); }, {"failed.gguf", "tensor 'bad'", "row 1", "non-finite"});
  EXPECT_FALSE(fs::exists(path));
  EXPECT_EQ(temporaries_beside(path), 0);
  expect_error([&] { w.write(tmp_path("no/such/dir/x.gguf")); }, {"x.gguf.tmp", "cannot create"});
  // Rewriting replaces an existing file atomically.
  GgufWriter ok;
  ok.add_kv("v", GgufValue::u32(1));
  std::string p2 = tmp_path("replace.gguf");
  ok.write(p2);
  GgufWriter ok2;
  ok2.add_kv("v", GgufValue::u32(2));
  ok2.write(p2);
  EXPECT_EQ(GgufFile::open(p2).get_u32("v"), 2u);
}
