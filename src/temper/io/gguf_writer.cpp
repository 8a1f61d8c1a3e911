#include "temper/io/gguf_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "temper/core/atomic_file.h"
#include "temper/core/error.h"

namespace temper::io {

namespace {

// Buffered writes to a file descriptor; every failure names the file.
class FileOut {
 public:
  explicit FileOut(std::string path) : path_(std::move(path)) {
    fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    TEMPER_CHECK(fd_ >= 0) << path_ << ": cannot create (" << std::strerror(errno) << ")";
    buf_.reserve(kBuf);
  }
  ~FileOut() {
    if (fd_ >= 0) ::close(fd_);
  }
  uint64_t pos() const { return pos_; }
  void bytes(const void* p, size_t n) {
    const uint8_t* b = static_cast<const uint8_t*>(p);
    pos_ += n;
    if (buf_.size() + n > kBuf) flush();
    if (n >= kBuf) {
      raw_write(b, n);
      return;
    }
    buf_.insert(buf_.end(), b, b + n);
  }
  template <class T>
  void pod(T v) {
    bytes(&v, sizeof v);
  }
  void str(const std::string& s) {
    pod<uint64_t>(s.size());
    bytes(s.data(), s.size());
  }
  void pad_to(uint64_t alignment) {
    static const uint8_t zeros[256] = {};
    uint64_t n = (alignment - pos_ % alignment) % alignment;
    while (n > 0) {
      uint64_t k = n < sizeof zeros ? n : sizeof zeros;
      bytes(zeros, k);
      n -= k;
    }
  }
  void flush() {
    raw_write(buf_.data(), buf_.size());
    buf_.clear();
  }
  // Flush and close (write_file_atomic fsyncs the file before renaming it).
  void finish() {
    flush();
    int fd = fd_;
    fd_ = -1;
    TEMPER_CHECK(::close(fd) == 0) << path_ << ": close failed (" << std::strerror(errno) << ")";
  }

 private:
  static constexpr size_t kBuf = 1 << 20;
  void raw_write(const uint8_t* p, size_t n) {
    while (n > 0) {
      ssize_t w = ::write(fd_, p, n);
      if (w < 0 && errno == EINTR) continue;
      TEMPER_CHECK(w > 0) << path_ << ": write failed (" << std::strerror(errno) << ")";
      p += w;
      n -= static_cast<size_t>(w);
    }
  }
  std::string path_;
  int fd_ = -1;
  std::vector<uint8_t> buf_;
  uint64_t pos_ = 0;
};

void write_value(FileOut& out, const GgufValue& v) {
  switch (v.type()) {
    case GgufValueType::u8:
    case GgufValueType::u16:
    case GgufValueType::u32:
    case GgufValueType::u64: {
      uint64_t x = 0;
      v.to_u64(&x);
      if (v.type() == GgufValueType::u8)
        out.pod(static_cast<uint8_t>(x));
      else if (v.type() == GgufValueType::u16)
        out.pod(static_cast<uint16_t>(x));
      else if (v.type() == GgufValueType::u32)
        out.pod(static_cast<uint32_t>(x));
      else
        out.pod(x);
      break;
    }
    case GgufValueType::i8:
    case GgufValueType::i16:
    case GgufValueType::i32:
    case GgufValueType::i64: {
      int64_t x = 0;
      v.to_i64(&x);
      if (v.type() == GgufValueType::i8)
        out.pod(static_cast<int8_t>(x));
      else if (v.type() == GgufValueType::i16)
        out.pod(static_cast<int16_t>(x));
      else if (v.type() == GgufValueType::i32)
        out.pod(static_cast<int32_t>(x));
      else
        out.pod(x);
      break;
    }
    case GgufValueType::f32: {
      double x = 0;
      v.to_f64(&x);
      out.pod(static_cast<float>(x));
      break;
    }
    case GgufValueType::f64: {
      double x = 0;
      v.to_f64(&x);
      out.pod(x);
      break;
    }
    case GgufValueType::boolean: {
      bool b = false;
      v.to_bool(&b);
      out.pod<uint8_t>(b ? 1 : 0);
      break;
    }
    case GgufValueType::string:
      out.str(v.str());
      break;
    case GgufValueType::array:
      out.pod(static_cast<uint32_t>(v.elem_type()));
      out.pod<uint64_t>(v.size());
      for (const GgufValue& item : v.items()) write_value(out, item);
      break;
  }
}

void check_value_fits(const std::string& key, const GgufValue& v) {
  // GgufValue's factories keep integers in range; only arrays need their item types checked.
  if (v.type() != GgufValueType::array) return;
  for (const GgufValue& item : v.items()) {
    TEMPER_CHECK(item.type() == v.elem_type())
        << "GGUF key '" << key << "': array of " << gguf_value_type_name(v.elem_type()) << " holds a "
        << gguf_value_type_name(item.type());
    check_value_fits(key, item);
  }
}

}  // namespace

GgufWriter::GgufWriter(uint32_t alignment) : alignment_(alignment) {
  TEMPER_CHECK(alignment != 0 && (alignment & (alignment - 1)) == 0)
      << "GGUF alignment must be a power of two, got " << alignment;
}

bool GgufWriter::has_kv(const std::string& key) const {
  for (const auto& [k, v] : kv_)
    if (k == key) return true;
  return false;
}

void GgufWriter::add_kv(const std::string& key, GgufValue value) {
  TEMPER_CHECK(!key.empty()) << "GGUF metadata key must not be empty";
  TEMPER_CHECK(!has_kv(key)) << "GGUF metadata key '" << key << "' added twice";
  if (key == "general.alignment") {
    uint64_t a = 0;
    TEMPER_CHECK(value.type() == GgufValueType::u32 && value.to_u64(&a) && a == alignment_)
        << "GGUF metadata key 'general.alignment' must be the writer's alignment as u32 (" << alignment_ << "), got "
        << value.describe() << " " << value.to_string();
  }
  check_value_fits(key, value);
  kv_.emplace_back(key, std::move(value));
}

GgufWriter::Entry& GgufWriter::add_entry(const std::string& name, const Shape& shape, GgmlType type) {
  TEMPER_CHECK(!name.empty() && name.size() <= kGgufMaxNameBytes)
      << "GGUF tensor name '" << name << "' must be 1-" << kGgufMaxNameBytes << " bytes";
  for (const Entry& e : tensors_) TEMPER_CHECK(e.name != name) << "GGUF tensor '" << name << "' added twice";
  TEMPER_CHECK(shape.rank() <= kGgufMaxDims)
      << "GGUF tensor '" << name << "' has rank " << shape.rank() << ", at most " << kGgufMaxDims << " allowed";
  const GgmlTypeInfo* ti = ggml_type_info(static_cast<uint32_t>(type));
  TEMPER_CHECK(ti != nullptr) << "GGUF tensor '" << name << "': unknown ggml type " << static_cast<uint32_t>(type);
  for (int64_t d : shape.dims()) TEMPER_CHECK(d >= 0) << "GGUF tensor '" << name << "' has shape " << shape.str();
  const int64_t cols = shape.rank() == 0 ? 1 : shape[-1];
  TEMPER_CHECK(cols % ti->block_size == 0)
      << "GGUF tensor '" << name << "' shape " << shape.str() << ": the last dim " << cols
      << " is not a multiple of the " << ti->name << " block size " << ti->block_size;
  Entry e;
  e.name = name;
  e.shape = shape;
  e.type = type;
  const int64_t rows = cols == 0 ? 0 : shape.numel() / cols;
  e.nbytes = ggml_row_bytes(type, cols) * static_cast<uint64_t>(rows);
  tensors_.push_back(std::move(e));
  return tensors_.back();
}

void GgufWriter::add_tensor(const std::string& name, const Shape& shape, GgmlType type, const float* data) {
  TEMPER_CHECK(type == GgmlType::f32 || type == GgmlType::f16 || type == GgmlType::bf16 || type == GgmlType::q8_0)
      << "GGUF tensor '" << name << "': cannot encode f32 values as " << ggml_type_name(type)
      << " (encodable: F32, F16, BF16, Q8_0)";
  add_entry(name, shape, type).f32 = data;
}

void GgufWriter::add_tensor(const std::string& name, const Shape& shape, GgmlType type,
                            std::function<void(float*)> fill) {
  TEMPER_CHECK(type == GgmlType::f32 || type == GgmlType::f16 || type == GgmlType::bf16 || type == GgmlType::q8_0)
      << "GGUF tensor '" << name << "': cannot encode f32 values as " << ggml_type_name(type)
      << " (encodable: F32, F16, BF16, Q8_0)";
  add_entry(name, shape, type).fill = std::move(fill);
}

void GgufWriter::add_tensor_raw(const std::string& name, const Shape& shape, GgmlType type, const void* bytes) {
  add_entry(name, shape, type).raw = bytes;
}

void GgufWriter::write(const std::string& path) const {
  std::vector<std::pair<std::string, GgufValue>> kv = kv_;
  if (!has_kv("general.alignment")) kv.emplace_back("general.alignment", GgufValue::u32(alignment_));

  write_file_atomic(path, [&](const std::string& tmp) {
    FileOut out(tmp);
    out.bytes("GGUF", 4);
    out.pod<uint32_t>(3);
    out.pod<uint64_t>(tensors_.size());
    out.pod<uint64_t>(kv.size());
    for (const auto& [k, v] : kv) {
      out.str(k);
      out.pod(static_cast<uint32_t>(v.type()));
      write_value(out, v);
    }
    uint64_t offset = 0;
    for (const Entry& e : tensors_) {
      out.str(e.name);
      out.pod(static_cast<uint32_t>(e.shape.rank()));
      for (int i = e.shape.rank() - 1; i >= 0; --i) out.pod(static_cast<uint64_t>(e.shape[i]));
      out.pod(static_cast<uint32_t>(e.type));
      out.pod(offset);
      offset += (e.nbytes + alignment_ - 1) / alignment_ * alignment_;
    }
    out.pad_to(alignment_);

    std::vector<uint8_t> enc;
    std::vector<float> tmpf;
    for (const Entry& e : tensors_) {
      const int64_t cols = e.shape.rank() == 0 ? 1 : e.shape[-1];
      const int64_t rows = cols == 0 ? 0 : e.shape.numel() / cols;
      if (e.raw) {
        out.bytes(e.raw, e.nbytes);
      } else {
        const float* src = e.f32;
        if (e.fill) {
          tmpf.assign(static_cast<size_t>(e.shape.numel()), 0.0f);
          e.fill(tmpf.data());
          src = tmpf.data();
        }
        const size_t row_bytes = ggml_row_bytes(e.type, cols);
        // Encode about 1 MB of rows at a time.
        const int64_t chunk = std::max<int64_t>(1, static_cast<int64_t>((1 << 20) / std::max<size_t>(row_bytes, 1)));
        for (int64_t r = 0; r < rows; r += chunk) {
          const int64_t n = std::min(chunk, rows - r);
          enc.resize(static_cast<size_t>(n) * row_bytes);
          for (int64_t i = 0; i < n; ++i) {
            try {
              quantize_row(e.type, src + (r + i) * cols, enc.data() + i * row_bytes, cols);
            } catch (const Error& err) {
              TEMPER_FAIL() << path << ": tensor '" << e.name << "' row " << r + i << ": " << err.what();
            }
          }
          out.bytes(enc.data(), enc.size());
        }
        if (e.fill) std::vector<float>().swap(tmpf);
      }
      out.pad_to(alignment_);
    }
    out.finish();
  });
}

}  // namespace temper::io
