#include "temper/core/tensor.h"

#include <sys/mman.h>

#include <cstdlib>
#include <cstring>
#include <sstream>

namespace temper {

int64_t Shape::numel() const {
  int64_t n = 1;
  for (int64_t d : dims_) n *= d;
  return n;
}

std::string Shape::str() const {
  std::ostringstream s;
  s << '[';
  for (size_t i = 0; i < dims_.size(); ++i) s << (i ? ", " : "") << dims_[i];
  s << ']';
  return s.str();
}

namespace {
// Large blocks come straight from mmap: page-aligned and zero-filled lazily by the kernel, so a
// 540 MB parameter buffer costs nothing until it is written (no memset pass).
constexpr size_t kMmapThreshold = size_t{1} << 22;
}  // namespace

void* aligned_alloc_bytes(size_t bytes) {
  size_t n = (bytes + 63) / 64 * 64;
  if (n == 0) n = 64;
  if (n >= kMmapThreshold) {
    void* p = ::mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    TEMPER_CHECK(p != MAP_FAILED) << "out of memory allocating " << bytes << " bytes";
    return p;
  }
  void* p = std::aligned_alloc(64, n);
  TEMPER_CHECK(p != nullptr) << "out of memory allocating " << bytes << " bytes";
  std::memset(p, 0, n);
  return p;
}

void aligned_free_bytes(void* p, size_t bytes) {
  size_t n = (bytes + 63) / 64 * 64;
  if (n == 0) n = 64;
  if (n >= kMmapThreshold) {
    ::munmap(p, n);
  } else {
    std::free(p);
  }
}

Storage::~Storage() {
  if (free_fn && data) free_fn(data, bytes);
}

std::shared_ptr<Storage> Storage::allocate(size_t bytes, Device device) {
  TEMPER_CHECK(device == Device::cpu) << "CUDA storage needs the CUDA backend";
  auto s = std::make_shared<Storage>();
  s->data = aligned_alloc_bytes(bytes);
  s->bytes = bytes;
  s->device = device;
  s->free_fn = &aligned_free_bytes;
  return s;
}

Tensor Tensor::empty(const Shape& shape, DType dtype, Device device) {
  for (int64_t d : shape.dims()) TEMPER_CHECK(d >= 0) << "negative dimension in shape " << shape.str();
  Tensor t;
  t.shape_ = shape;
  t.dtype_ = dtype;
  t.device_ = device;
  t.storage_ = Storage::allocate(static_cast<size_t>(shape.numel()) * dtype_size(dtype), device);
  t.data_ = t.storage_->data;
  return t;
}

Tensor Tensor::zeros(const Shape& shape, DType dtype, Device device) { return empty(shape, dtype, device); }

Tensor Tensor::wrap(void* data, const Shape& shape, DType dtype, Device device, std::shared_ptr<void> keep) {
  Tensor t;
  t.data_ = data;
  t.shape_ = shape;
  t.dtype_ = dtype;
  t.device_ = device;
  t.keep_ = std::move(keep);
  return t;
}

Tensor Tensor::slice(int64_t begin, int64_t end) const {
  TEMPER_CHECK(rank() >= 1 && 0 <= begin && begin <= end && end <= dim(0))
      << "slice [" << begin << ", " << end << ") out of range for shape " << shape_.str();
  Tensor t = *this;
  std::vector<int64_t> d = shape_.dims();
  int64_t row = numel() / (d[0] ? d[0] : 1);
  d[0] = end - begin;
  t.shape_ = Shape(d);
  t.data_ = static_cast<char*>(data_) + static_cast<size_t>(begin * row) * dtype_size(dtype_);
  return t;
}

Tensor Tensor::reshape(const Shape& shape) const {
  TEMPER_CHECK(shape.numel() == numel()) << "cannot reshape " << shape_.str() << " to " << shape.str();
  Tensor t = *this;
  t.shape_ = shape;
  return t;
}

Tensor Tensor::clone() const {
  Tensor t = empty(shape_, dtype_, device_);
  std::memcpy(t.data_, data_, nbytes());
  return t;
}

namespace {
double load_as_f64(const void* p, DType t, int64_t i) {
  switch (t) {
    case DType::f32: return static_cast<const float*>(p)[i];
    case DType::bf16: return bf16_to_f32(static_cast<const uint16_t*>(p)[i]);
    case DType::f16: return f16_to_f32(static_cast<const uint16_t*>(p)[i]);
    case DType::f64: return static_cast<const double*>(p)[i];
    case DType::i32: return static_cast<const int32_t*>(p)[i];
    case DType::i64: return static_cast<double>(static_cast<const int64_t*>(p)[i]);
    case DType::u8: return static_cast<const uint8_t*>(p)[i];
  }
  return 0;
}
void store_from_f64(void* p, DType t, int64_t i, double v) {
  switch (t) {
    case DType::f32: static_cast<float*>(p)[i] = static_cast<float>(v); break;
    case DType::bf16: static_cast<uint16_t*>(p)[i] = f32_to_bf16(static_cast<float>(v)); break;
    case DType::f16: static_cast<uint16_t*>(p)[i] = f32_to_f16(static_cast<float>(v)); break;
    case DType::f64: static_cast<double*>(p)[i] = v; break;
    case DType::i32: static_cast<int32_t*>(p)[i] = static_cast<int32_t>(v); break;
    case DType::i64: static_cast<int64_t*>(p)[i] = static_cast<int64_t>(v); break;
    case DType::u8: static_cast<uint8_t*>(p)[i] = static_cast<uint8_t>(v); break;
  }
}
}  // namespace

Tensor Tensor::to(DType dtype) const {
  TEMPER_CHECK(device_ == Device::cpu) << "Tensor::to runs on CPU tensors";
  if (dtype == dtype_) return clone();
  Tensor t = empty(shape_, dtype, device_);
  int64_t n = numel();
  for (int64_t i = 0; i < n; ++i) store_from_f64(t.data_, dtype, i, load_as_f64(data_, dtype_, i));
  return t;
}

void Tensor::fill_zero() { std::memset(data_, 0, nbytes()); }

}  // namespace temper
