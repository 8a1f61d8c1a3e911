#include "temper/io/gguf_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>

#include "temper/core/error.h"
#include "temper/io/file_map.h"
#include "temper/core/thread_pool.h"

namespace temper::io {

namespace {
constexpr int kMaxArrayDepth = 8;                 // arrays of arrays nest at most this deep (the stack stays bounded)
constexpr uint64_t kHeaderBytes = 4 + 4 + 8 + 8;  // magic, version, tensor count, KV count
}  // namespace

// Reads the header, metadata and tensor infos of a mapped file, checking every length against the
// bytes that remain before it is used.
class GgufParser {
 public:
  explicit GgufParser(GgufFile& f) : f_(f), p_(f.base_), n_(f.size_) {}

  void parse() {
    TEMPER_CHECK(n_ >= kHeaderBytes) << f_.path_ << ": file is " << n_ << " bytes, too short for a GGUF header ("
                                     << kHeaderBytes << " bytes)";
    TEMPER_CHECK(std::memcmp(p_, "GGUF", 4) == 0)
        << f_.path_ << ": bad magic " << magic_repr() << ", expected \"GGUF\" (not a GGUF file)";
    pos_ = 4;
    ctx_ = "header";
    uint32_t version = read<uint32_t>("version");
    TEMPER_CHECK(!(version > 0xffff && (version & 0xffff) == 0))
        << f_.path_ << ": version field " << version << " looks byte-swapped: big-endian GGUF files are not supported";
    TEMPER_CHECK(version == 2 || version == 3)
        << f_.path_ << ": unsupported GGUF version " << version << " (supported: 2, 3)";
    f_.version_ = version;
    uint64_t n_tensors = read<uint64_t>("tensor count");
    uint64_t n_kv = read<uint64_t>("metadata KV count");

    // Each KV takes at least 8 (key length) + 4 (type) + 1 bytes, each tensor info 8 + 4 + 4 + 8.
    TEMPER_CHECK(n_kv <= (n_ - pos_) / 13) << f_.path_ << ": header claims " << n_kv << " metadata KVs, more than the "
                                           << n_ - pos_ << " remaining bytes can hold (truncated or corrupt file)";
    f_.kv_.reserve(n_kv);
    for (uint64_t i = 0; i < n_kv; ++i) parse_kv(i);

    TEMPER_CHECK(n_tensors <= (n_ - pos_) / 24)
        << f_.path_ << ": header claims " << n_tensors << " tensors, more than the " << n_ - pos_
        << " remaining bytes can hold (truncated or corrupt file)";
    read_alignment();
    f_.tensors_.reserve(n_tensors);
    for (uint64_t i = 0; i < n_tensors; ++i) parse_tensor_info(i);

    uint64_t a = f_.alignment_;
    f_.data_offset_ = (pos_ + a - 1) / a * a;
    check_tensor_ranges();
  }

 private:
  std::string magic_repr() const {
    std::string s = "\"";
    for (int i = 0; i < 4; ++i) {
      unsigned char c = p_[i];
      if (c >= 32 && c < 127)
        s += static_cast<char>(c);
      else {
        char buf[8];
        std::snprintf(buf, sizeof buf, "\\x%02x", c);
        s += buf;
      }
    }
    return s + "\"";
  }

  [[noreturn]] void truncated(const char* what, uint64_t need) const {
    TEMPER_FAIL() << f_.path_ << ": truncated file: " << ctx_ << ": " << what << " at byte " << pos_ << " needs "
                  << need << " bytes, only " << n_ - pos_ << " remain (file size " << n_ << ")";
  }

  template <class T>
  T read(const char* what) {
    if (n_ - pos_ < sizeof(T)) truncated(what, sizeof(T));
    T v;
    std::memcpy(&v, p_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }

  std::string read_string(const char* what) {
    uint64_t len = read<uint64_t>(what);
    if (n_ - pos_ < len) truncated(what, len);
    std::string s(reinterpret_cast<const char*>(p_ + pos_), static_cast<size_t>(len));
    pos_ += len;
    return s;
  }

  GgufValueType read_type(const char* what) {
    uint64_t at = pos_;
    uint32_t code = read<uint32_t>(what);
    TEMPER_CHECK(gguf_value_type_valid(code)) << f_.path_ << ": " << ctx_ << ": unknown " << what << " " << code
                                              << " at byte " << at << " (GGUF value types are 0..12)";
    return static_cast<GgufValueType>(code);
  }

  GgufValue read_value(GgufValueType t, int depth) {
    switch (t) {
      case GgufValueType::u8:
        return GgufValue::u8(read<uint8_t>("u8 value"));
      case GgufValueType::i8:
        return GgufValue::i8(read<int8_t>("i8 value"));
      case GgufValueType::u16:
        return GgufValue::u16(read<uint16_t>("u16 value"));
      case GgufValueType::i16:
        return GgufValue::i16(read<int16_t>("i16 value"));
      case GgufValueType::u32:
        return GgufValue::u32(read<uint32_t>("u32 value"));
      case GgufValueType::i32:
        return GgufValue::i32(read<int32_t>("i32 value"));
      case GgufValueType::u64:
        return GgufValue::u64(read<uint64_t>("u64 value"));
      case GgufValueType::i64:
        return GgufValue::i64(read<int64_t>("i64 value"));
      case GgufValueType::f32:
        return GgufValue::f32(read<float>("f32 value"));
      case GgufValueType::f64:
        return GgufValue::f64(read<double>("f64 value"));
      case GgufValueType::boolean: {
        uint64_t at = pos_;
        uint8_t b = read<uint8_t>("bool value");
        TEMPER_CHECK(b <= 1) << f_.path_ << ": " << ctx_ << ": bool value at byte " << at << " is " << int{b}
                             << ", expected 0 or 1";
        return GgufValue::boolean(b != 0);
      }
      case GgufValueType::string:
        return GgufValue::string(read_string("string length"));
      case GgufValueType::array: {
        TEMPER_CHECK(depth < kMaxArrayDepth)
            << f_.path_ << ": " << ctx_ << ": arrays nested more than " << kMaxArrayDepth << " deep";
        GgufValueType elem = read_type("array item type");
        uint64_t count = read<uint64_t>("array length");
        uint64_t min_item = elem == GgufValueType::string  ? 8
                            : elem == GgufValueType::array ? 12
                                                           : gguf_value_type_size(elem);
        TEMPER_CHECK(count <= (n_ - pos_) / min_item)
            << f_.path_ << ": " << ctx_ << ": array of " << count << " " << gguf_value_type_name(elem) << " at byte "
            << pos_ << " needs at least " << min_item << " bytes per item, only " << n_ - pos_
            << " bytes remain (truncated or corrupt file)";
        std::vector<GgufValue> items;
        items.reserve(count);
        for (uint64_t i = 0; i < count; ++i) items.push_back(read_value(elem, depth + 1));
        return GgufValue::array(elem, std::move(items));
      }
    }
    TEMPER_FAIL() << f_.path_ << ": " << ctx_ << ": unknown value type";
  }

  void parse_kv(uint64_t i) {
    ctx_ = "metadata KV #" + std::to_string(i);
    std::string key = read_string("key length");
    TEMPER_CHECK(!key.empty()) << f_.path_ << ": " << ctx_ << " has an empty key";
    ctx_ = "metadata key '" + key + "'";
    TEMPER_CHECK(!f_.kv_index_.count(key)) << f_.path_ << ": duplicate metadata key '" << key << "'";
    GgufValueType t = read_type("value type");
    GgufValue v = read_value(t, 0);
    f_.kv_index_[key] = f_.kv_.size();
    f_.kv_.emplace_back(std::move(key), std::move(v));
  }

  void read_alignment() {
    const GgufValue* a = f_.find("general.alignment");
    if (!a) return;
    TEMPER_CHECK(a->type() == GgufValueType::u32)
        << f_.path_ << ": metadata key 'general.alignment' has type " << a->describe() << ", expected u32";
    uint64_t v = 0;
    a->to_u64(&v);
    TEMPER_CHECK(v != 0 && (v & (v - 1)) == 0)
        << f_.path_ << ": metadata key 'general.alignment' is " << v << ", expected a power of two";
    f_.alignment_ = static_cast<uint32_t>(v);
  }

  void parse_tensor_info(uint64_t i) {
    ctx_ = "tensor info #" + std::to_string(i);
    GgufTensorInfo t;
    t.name = read_string("name length");
    ctx_ = "tensor '" + t.name + "'";
    TEMPER_CHECK(!t.name.empty()) << f_.path_ << ": tensor info #" << i << " has an empty name";
    TEMPER_CHECK(t.name.size() <= kGgufMaxNameBytes) << f_.path_ << ": tensor name '" << t.name << "' is "
                                                     << t.name.size() << " bytes, the limit is " << kGgufMaxNameBytes;
    TEMPER_CHECK(!f_.tensor_index_.count(t.name)) << f_.path_ << ": duplicate tensor '" << t.name << "'";
    uint32_t n_dims = read<uint32_t>("n_dims");
    TEMPER_CHECK(n_dims <= kGgufMaxDims) << f_.path_ << ": tensor '" << t.name << "' has n_dims " << n_dims
                                         << ", expected at most " << kGgufMaxDims;
    uint64_t numel = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      uint64_t ne = read<uint64_t>("dimension");
      TEMPER_CHECK(ne <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) &&
                   !__builtin_mul_overflow(numel, ne, &numel) &&
                   numel <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
          << f_.path_ << ": tensor '" << t.name << "' dimension " << d << " (" << ne
          << ") makes the element count overflow 63 bits";
      t.ne.push_back(static_cast<int64_t>(ne));
    }
    uint64_t type_at = pos_;
    uint32_t code = read<uint32_t>("type");
    const GgmlTypeInfo* ti = ggml_type_info(code);
    TEMPER_CHECK(ti != nullptr) << f_.path_ << ": tensor '" << t.name << "' has unknown ggml type code " << code
                                << " at byte " << type_at << " (known: 0-3, 6-30, 34, 35)";
    t.type = static_cast<GgmlType>(code);
    int64_t cols = t.ne.empty() ? 1 : t.ne[0];
    TEMPER_CHECK(cols % ti->block_size == 0)
        << f_.path_ << ": tensor '" << t.name << "' of type " << ti->name << " has ne[0] = " << cols
        << ", not a multiple of the block size " << ti->block_size;
    uint64_t row_bytes = static_cast<uint64_t>(cols / ti->block_size) * ti->block_bytes;
    uint64_t rows = cols == 0 ? 0 : numel / static_cast<uint64_t>(cols);
    TEMPER_CHECK(!__builtin_mul_overflow(row_bytes, rows, &t.nbytes))
        << f_.path_ << ": tensor '" << t.name << "' byte size overflows 64 bits";
    t.offset = read<uint64_t>("offset");
    TEMPER_CHECK(t.offset % f_.alignment_ == 0) << f_.path_ << ": tensor '" << t.name << "' offset " << t.offset
                                                << " is not a multiple of the alignment " << f_.alignment_;
    f_.tensor_index_[t.name] = f_.tensors_.size();
    f_.tensors_.push_back(std::move(t));
  }

  void check_tensor_ranges() {
    uint64_t avail = f_.data_offset_ <= n_ ? n_ - f_.data_offset_ : 0;
    std::vector<const GgufTensorInfo*> by_offset;
    for (const GgufTensorInfo& t : f_.tensors_) {
      TEMPER_CHECK(t.offset <= avail && t.nbytes <= avail - t.offset)
          << f_.path_ << ": tensor '" << t.name << "' data [" << t.offset << ", " << t.offset + t.nbytes << ") (type "
          << ggml_type_name(t.type) << ", " << t.nbytes << " bytes) extends past the end of the " << avail
          << "-byte data section starting at byte " << f_.data_offset_ << " (file size " << n_ << "; truncated file?)";
      if (t.nbytes > 0) by_offset.push_back(&t);
    }
    std::sort(by_offset.begin(), by_offset.end(),
              [](const GgufTensorInfo* a, const GgufTensorInfo* b) { return a->offset < b->offset; });
    for (size_t i = 1; i < by_offset.size(); ++i) {
      const GgufTensorInfo *a = by_offset[i - 1], *b = by_offset[i];
      TEMPER_CHECK(a->offset + a->nbytes <= b->offset)
          << f_.path_ << ": tensors '" << a->name << "' [" << a->offset << ", " << a->offset + a->nbytes << ") and '"
          << b->name << "' [" << b->offset << ", " << b->offset + b->nbytes << ") overlap";
    }
  }

  GgufFile& f_;
  const uint8_t* p_;
  uint64_t n_;
  uint64_t pos_ = 0;
  std::string ctx_;
};

Shape GgufTensorInfo::shape() const {
  std::vector<int64_t> d(ne.rbegin(), ne.rend());
  return Shape(std::move(d));
}

int64_t GgufTensorInfo::numel() const {
  int64_t n = 1;
  for (int64_t d : ne) n *= d;
  return n;
}

GgufFile GgufFile::open(const std::string& path) {
  FileBytes fb = file_bytes(path, kHeaderBytes, "a GGUF header (24 bytes)");
  GgufFile f;
  f.path_ = path;
  f.map_ = fb.keep;
  f.mapped_ = fb.mapped;
  f.base_ = fb.data;
  f.size_ = fb.size;
  GgufParser(f).parse();
  return f;
}

std::vector<std::pair<std::string, GgufValue>> GgufFile::metadata_with_prefix(const std::string& prefix) const {
  std::vector<std::pair<std::string, GgufValue>> out;
  for (const auto& kv : kv_)
    if (kv.first.compare(0, prefix.size(), prefix) == 0) out.push_back(kv);
  return out;
}

const GgufValue* GgufFile::find(const std::string& key) const {
  auto it = kv_index_.find(key);
  return it == kv_index_.end() ? nullptr : &kv_[it->second].second;
}

const GgufValue& GgufFile::at(const std::string& key) const {
  const GgufValue* v = find(key);
  TEMPER_CHECK(v != nullptr) << path_ << ": missing metadata key '" << key << "'";
  return *v;
}

namespace {

template <class T>
T checked_int(const std::string& path, const std::string& key, const GgufValue& v, const char* want) {
  if constexpr (std::is_signed_v<T>) {
    int64_t x = 0;
    TEMPER_CHECK(v.is_integer()) << path << ": metadata key '" << key << "' has type " << v.describe()
                                 << ", expected an integer (" << want << ")";
    TEMPER_CHECK(v.to_i64(&x) && x >= std::numeric_limits<T>::min() && x <= std::numeric_limits<T>::max())
        << path << ": metadata key '" << key << "' = " << v.to_string() << " does not fit " << want;
    return static_cast<T>(x);
  } else {
    uint64_t x = 0;
    TEMPER_CHECK(v.is_integer()) << path << ": metadata key '" << key << "' has type " << v.describe()
                                 << ", expected an unsigned integer (" << want << ")";
    TEMPER_CHECK(v.to_u64(&x) && x <= std::numeric_limits<T>::max())
        << path << ": metadata key '" << key << "' = " << v.to_string() << " does not fit " << want;
    return static_cast<T>(x);
  }
}

double checked_float(const std::string& path, const std::string& key, const GgufValue& v) {
  double x = 0;
  TEMPER_CHECK(v.to_f64(&x)) << path << ": metadata key '" << key << "' has type " << v.describe()
                             << ", expected a float (f32 or f64)";
  return x;
}

const GgufValue& checked_array(const std::string& path, const std::string& key, const GgufValue& v, const char* want) {
  TEMPER_CHECK(v.type() == GgufValueType::array)
      << path << ": metadata key '" << key << "' has type " << v.describe() << ", expected an array of " << want;
  return v;
}

}  // namespace

uint32_t GgufFile::get_u32(const std::string& key) const {
  return checked_int<uint32_t>(path_, key, at(key), "u32");
}
int32_t GgufFile::get_i32(const std::string& key) const {
  return checked_int<int32_t>(path_, key, at(key), "i32");
}
uint64_t GgufFile::get_u64(const std::string& key) const {
  return checked_int<uint64_t>(path_, key, at(key), "u64");
}
int64_t GgufFile::get_i64(const std::string& key) const {
  return checked_int<int64_t>(path_, key, at(key), "i64");
}
float GgufFile::get_f32(const std::string& key) const {
  return static_cast<float>(checked_float(path_, key, at(key)));
}
double GgufFile::get_f64(const std::string& key) const {
  return checked_float(path_, key, at(key));
}

bool GgufFile::get_bool(const std::string& key) const {
  const GgufValue& v = at(key);
  bool b = false;
  TEMPER_CHECK(v.to_bool(&b)) << path_ << ": metadata key '" << key << "' has type " << v.describe()
                              << ", expected bool";
  return b;
}

const std::string& GgufFile::get_str(const std::string& key) const {
  const GgufValue& v = at(key);
  TEMPER_CHECK(v.type() == GgufValueType::string)
      << path_ << ": metadata key '" << key << "' has type " << v.describe() << ", expected string";
  return v.str();
}

std::vector<std::string> GgufFile::get_str_array(const std::string& key) const {
  const GgufValue& v = checked_array(path_, key, at(key), "string");
  TEMPER_CHECK(v.elem_type() == GgufValueType::string)
      << path_ << ": metadata key '" << key << "' has type " << v.describe() << ", expected an array of string";
  std::vector<std::string> out;
  out.reserve(v.size());
  for (const GgufValue& x : v.items()) out.push_back(x.str());
  return out;
}

std::vector<int32_t> GgufFile::get_i32_array(const std::string& key) const {
  const GgufValue& v = checked_array(path_, key, at(key), "integers");
  std::vector<int32_t> out;
  out.reserve(v.size());
  for (size_t i = 0; i < v.size(); ++i)
    out.push_back(checked_int<int32_t>(path_, key + "[" + std::to_string(i) + "]", v.items()[i], "i32"));
  return out;
}

std::vector<float> GgufFile::get_f32_array(const std::string& key) const {
  const GgufValue& v = checked_array(path_, key, at(key), "floats");
  std::vector<float> out;
  out.reserve(v.size());
  for (size_t i = 0; i < v.size(); ++i)
    out.push_back(static_cast<float>(checked_float(path_, key + "[" + std::to_string(i) + "]", v.items()[i])));
  return out;
}

uint32_t GgufFile::get_u32_or(const std::string& key, uint32_t fallback) const {
  return has_key(key) ? get_u32(key) : fallback;
}

float GgufFile::get_f32_or(const std::string& key, float fallback) const {
  return has_key(key) ? get_f32(key) : fallback;
}

const GgufTensorInfo* GgufFile::find_tensor(const std::string& name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

const GgufTensorInfo& GgufFile::tensor(const std::string& name) const {
  const GgufTensorInfo* t = find_tensor(name);
  TEMPER_CHECK(t != nullptr) << path_ << ": no tensor named '" << name << "'";
  return *t;
}

const uint8_t* GgufFile::tensor_data(const GgufTensorInfo& t) const {
  return base_ + data_offset_ + t.offset;
}

void GgufFile::release(const std::string& name) const {
  const GgufTensorInfo& t = tensor(name);
  file_bytes_release(mapped_, tensor_data(t), static_cast<size_t>(t.nbytes));
}

QuantView GgufFile::quant_view(const std::string& name) const {
  const GgufTensorInfo& t = tensor(name);
  QuantView v;
  v.type = t.type;
  v.data = tensor_data(t);
  v.cols = t.ne.empty() ? 1 : t.ne[0];
  v.rows = v.cols == 0 ? 0 : t.numel() / v.cols;
  v.row_bytes = ggml_row_bytes(t.type, v.cols);
  v.keep = map_;
  return v;
}

Tensor GgufFile::view(const std::string& name) const {
  const GgufTensorInfo& t = tensor(name);
  DType dt;
  switch (t.type) {
    case GgmlType::f32:
      dt = DType::f32;
      break;
    case GgmlType::f16:
      dt = DType::f16;
      break;
    case GgmlType::bf16:
      dt = DType::bf16;
      break;
    case GgmlType::f64:
      dt = DType::f64;
      break;
    case GgmlType::i32:
      dt = DType::i32;
      break;
    case GgmlType::i64:
      dt = DType::i64;
      break;
    default:
      TEMPER_FAIL() << path_ << ": tensor '" << name << "' has type " << ggml_type_name(t.type)
                    << ", which has no plain dtype view (F32, F16, BF16, F64, I32, I64); use quant_view or dequantize";
  }
  return Tensor::wrap(const_cast<uint8_t*>(tensor_data(t)), t.shape(), dt, Device::cpu, map_);
}

void GgufFile::dequantize_into(const std::string& name, float* dst, int64_t n) const {
  const GgufTensorInfo& t = tensor(name);
  TEMPER_CHECK(ggml_type_dequantizable(t.type))
      << path_ << ": tensor '" << name << "' has type " << ggml_type_name(t.type)
      << ", which temper cannot decode (decodable: " << ggml_dequantizable_list() << ")";
  TEMPER_CHECK(t.numel() == n) << path_ << ": tensor '" << name << "' has " << t.numel() << " elements (shape "
                               << t.shape().str() << "), expected " << n;
  QuantView v = quant_view(name);
  // Rows are independent; chunks of >= 64 rows keep the per-task overhead small.
  parallel_for(v.rows, 64, [&](int64_t b, int64_t e) { v.dequantize_rows(b, e, dst + b * v.cols); });
}

Tensor GgufFile::dequantize(const std::string& name) const {
  const GgufTensorInfo& t = tensor(name);
  Tensor out = Tensor::empty(t.shape(), DType::f32);
  dequantize_into(name, out.data<float>(), t.numel());
  return out;
}

}  // namespace temper::io
