// A GGUF metadata value: one of the 13 GGUF value types (integers of 8-64 bits, f32, f64, bool,
// UTF-8 string, and arrays of any of them, arrays of arrays included). Used by the reader
// (GgufFile) and the writer (GgufWriter, which takes caller-supplied KV lists such as tokenizer
// metadata). Follows the GGUF spec (ggml docs/gguf.md, gguf_metadata_value_type).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace temper::io {

// clang-format off
enum class GgufValueType : uint32_t {
  u8 = 0, i8 = 1, u16 = 2, i16 = 3, u32 = 4, i32 = 5, f32 = 6, boolean = 7, string = 8, array = 9,
  u64 = 10, i64 = 11, f64 = 12,
};
// clang-format on

bool gguf_value_type_valid(uint32_t code);
std::string_view gguf_value_type_name(GgufValueType t);  // "u32", "string", "array", ...
size_t gguf_value_type_size(GgufValueType t);            // bytes of a fixed-size type; 0 for string/array

class GgufValue {
 public:
  GgufValue() = default;  // u8 0
  static GgufValue u8(uint8_t v) { return uint_(GgufValueType::u8, v); }
  static GgufValue u16(uint16_t v) { return uint_(GgufValueType::u16, v); }
  static GgufValue u32(uint32_t v) { return uint_(GgufValueType::u32, v); }
  static GgufValue u64(uint64_t v) { return uint_(GgufValueType::u64, v); }
  static GgufValue i8(int8_t v) { return int_(GgufValueType::i8, v); }
  static GgufValue i16(int16_t v) { return int_(GgufValueType::i16, v); }
  static GgufValue i32(int32_t v) { return int_(GgufValueType::i32, v); }
  static GgufValue i64(int64_t v) { return int_(GgufValueType::i64, v); }
  static GgufValue f32(float v);
  static GgufValue f64(double v);
  static GgufValue boolean(bool v);
  static GgufValue string(std::string v);
  // Every item must have type `elem` (throws otherwise); nested arrays have elem == array.
  static GgufValue array(GgufValueType elem, std::vector<GgufValue> items);
  static GgufValue string_array(const std::vector<std::string>& v);
  static GgufValue i32_array(const std::vector<int32_t>& v);
  static GgufValue f32_array(const std::vector<float>& v);

  GgufValueType type() const { return type_; }
  GgufValueType elem_type() const { return elem_; }  // arrays only
  bool is_integer() const;                           // u8..i64 (not bool)
  bool is_float() const { return type_ == GgufValueType::f32 || type_ == GgufValueType::f64; }

  // Checked conversions: false when the type does not convert (string to int, float to int, ...)
  // or the value does not fit the target.
  bool to_u64(uint64_t* out) const;
  bool to_i64(int64_t* out) const;
  bool to_f64(double* out) const;  // f32, f64 only
  bool to_bool(bool* out) const;   // bool only

  const std::string& str() const { return str_; }                 // string only
  const std::vector<GgufValue>& items() const { return items_; }  // array only
  size_t size() const { return items_.size(); }                   // array length

  // "u32", "string", "array of 49152 string", "array of 3 array" (for error messages).
  std::string describe() const;
  // The value for people: numbers, quoted strings, arrays shortened to max_items items.
  std::string to_string(size_t max_items = 8) const;

  bool operator==(const GgufValue& o) const;

 private:
  static GgufValue uint_(GgufValueType t, uint64_t v);
  static GgufValue int_(GgufValueType t, int64_t v);

  GgufValueType type_ = GgufValueType::u8;
  GgufValueType elem_ = GgufValueType::u8;
  union {
    uint64_t u_ = 0;  // unsigned types and bool
    int64_t i_;       // signed types
    double f_;        // f32 (exactly representable) and f64
  };
  std::string str_;
  std::vector<GgufValue> items_;
};

}  // namespace temper::io
