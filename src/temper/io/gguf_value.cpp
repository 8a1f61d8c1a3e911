#include "temper/io/gguf_value.h"

#include <cmath>
#include <limits>
#include <sstream>

#include "temper/core/error.h"

namespace temper::io {

bool gguf_value_type_valid(uint32_t code) {
  return code <= static_cast<uint32_t>(GgufValueType::f64);
}

std::string_view gguf_value_type_name(GgufValueType t) {
  switch (t) {
    case GgufValueType::u8:
      return "u8";
    case GgufValueType::i8:
      return "i8";
    case GgufValueType::u16:
      return "u16";
    case GgufValueType::i16:
      return "i16";
    case GgufValueType::u32:
      return "u32";
    case GgufValueType::i32:
      return "i32";
    case GgufValueType::f32:
      return "f32";
    case GgufValueType::boolean:
      return "bool";
    case GgufValueType::string:
      return "string";
    case GgufValueType::array:
      return "array";
    case GgufValueType::u64:
      return "u64";
    case GgufValueType::i64:
      return "i64";
    case GgufValueType::f64:
      return "f64";
  }
  return "?";
}

size_t gguf_value_type_size(GgufValueType t) {
  switch (t) {
    case GgufValueType::u8:
    case GgufValueType::i8:
    case GgufValueType::boolean:
      return 1;
    case GgufValueType::u16:
    case GgufValueType::i16:
      return 2;
    case GgufValueType::u32:
    case GgufValueType::i32:
    case GgufValueType::f32:
      return 4;
    case GgufValueType::u64:
    case GgufValueType::i64:
    case GgufValueType::f64:
      return 8;
    case GgufValueType::string:
    case GgufValueType::array:
      return 0;
  }
  return 0;
}

namespace {
bool is_unsigned(GgufValueType t) {
  return t == GgufValueType::u8 || t == GgufValueType::u16 || t == GgufValueType::u32 || t == GgufValueType::u64;
}
bool is_signed(GgufValueType t) {
  return t == GgufValueType::i8 || t == GgufValueType::i16 || t == GgufValueType::i32 || t == GgufValueType::i64;
}
}  // namespace

GgufValue GgufValue::uint_(GgufValueType t, uint64_t v) {
  GgufValue r;
  r.type_ = t;
  r.u_ = v;
  return r;
}

GgufValue GgufValue::int_(GgufValueType t, int64_t v) {
  GgufValue r;
  r.type_ = t;
  r.i_ = v;
  return r;
}

GgufValue GgufValue::f32(float v) {
  GgufValue r;
  r.type_ = GgufValueType::f32;
  r.f_ = v;
  return r;
}

GgufValue GgufValue::f64(double v) {
  GgufValue r;
  r.type_ = GgufValueType::f64;
  r.f_ = v;
  return r;
}

GgufValue GgufValue::boolean(bool v) {
  return uint_(GgufValueType::boolean, v ? 1 : 0);
}

GgufValue GgufValue::string(std::string v) {
  GgufValue r;
  r.type_ = GgufValueType::string;
  r.str_ = std::move(v);
  return r;
}

GgufValue GgufValue::array(GgufValueType elem, std::vector<GgufValue> items) {
  for (size_t i = 0; i < items.size(); ++i)
    TEMPER_CHECK(items[i].type_ == elem) << "GGUF array of " << gguf_value_type_name(elem) << ": item " << i
                                         << " has type " << gguf_value_type_name(items[i].type_);
  GgufValue r;
  r.type_ = GgufValueType::array;
  r.elem_ = elem;
  r.items_ = std::move(items);
  return r;
}

GgufValue GgufValue::string_array(const std::vector<std::string>& v) {
  std::vector<GgufValue> items;
  items.reserve(v.size());
  for (const std::string& s : v) items.push_back(string(s));
  return array(GgufValueType::string, std::move(items));
}

GgufValue GgufValue::i32_array(const std::vector<int32_t>& v) {
  std::vector<GgufValue> items;
  items.reserve(v.size());
  for (int32_t x : v) items.push_back(i32(x));
  return array(GgufValueType::i32, std::move(items));
}

GgufValue GgufValue::f32_array(const std::vector<float>& v) {
  std::vector<GgufValue> items;
  items.reserve(v.size());
  for (float x : v) items.push_back(f32(x));
  return array(GgufValueType::f32, std::move(items));
}

bool GgufValue::is_integer() const {
  return is_unsigned(type_) || is_signed(type_);
}

bool GgufValue::to_u64(uint64_t* out) const {
  if (is_unsigned(type_)) {
    *out = u_;
    return true;
  }
  if (is_signed(type_) && i_ >= 0) {
    *out = static_cast<uint64_t>(i_);
    return true;
  }
  return false;
}

bool GgufValue::to_i64(int64_t* out) const {
  if (is_signed(type_)) {
    *out = i_;
    return true;
  }
  if (is_unsigned(type_) && u_ <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    *out = static_cast<int64_t>(u_);
    return true;
  }
  return false;
}

bool GgufValue::to_f64(double* out) const {
  if (!is_float()) return false;
  *out = f_;
  return true;
}

bool GgufValue::to_bool(bool* out) const {
  if (type_ != GgufValueType::boolean) return false;
  *out = u_ != 0;
  return true;
}

std::string GgufValue::describe() const {
  if (type_ != GgufValueType::array) return std::string(gguf_value_type_name(type_));
  return "array of " + std::to_string(items_.size()) + " " + std::string(gguf_value_type_name(elem_));
}

std::string GgufValue::to_string(size_t max_items) const {
  std::ostringstream s;
  s.precision(9);
  if (is_unsigned(type_))
    s << u_;
  else if (is_signed(type_))
    s << i_;
  else if (is_float())
    s << f_;
  else if (type_ == GgufValueType::boolean)
    s << (u_ ? "true" : "false");
  else if (type_ == GgufValueType::string) {
    s << '"';
    size_t n = 0;
    for (char c : str_) {
      if (++n > 200) {
        s << "...";
        break;
      }
      if (c == '\n')
        s << "\\n";
      else if (c == '"' || c == '\\')
        s << '\\' << c;
      else
        s << c;
    }
    s << '"';
  } else {
    s << '[';
    for (size_t i = 0; i < items_.size() && i < max_items; ++i) s << (i ? ", " : "") << items_[i].to_string(max_items);
    if (items_.size() > max_items) s << ", ... (" << items_.size() << " items)";
    s << ']';
  }
  return s.str();
}

bool GgufValue::operator==(const GgufValue& o) const {
  if (type_ != o.type_) return false;
  if (is_unsigned(type_) || type_ == GgufValueType::boolean) return u_ == o.u_;
  if (is_signed(type_)) return i_ == o.i_;
  if (is_float()) return f_ == o.f_ || (std::isnan(f_) && std::isnan(o.f_));
  if (type_ == GgufValueType::string) return str_ == o.str_;
  return elem_ == o.elem_ && items_ == o.items_;
}

}  // namespace temper::io
