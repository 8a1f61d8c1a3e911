// Tensor: shape (row-major, PyTorch order), dtype, device and storage. Always contiguous.
// Owning tensors share a Storage; views (slice along dim 0, reshape, wrap of external memory such
// as an mmapped file) do not copy. Kernels take raw pointers from data<T>() and never allocate.
// Leaves out: strides, broadcasting, autograd (layers write explicit forward/backward).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "temper/core/dtype.h"
#include "temper/core/error.h"

namespace temper {

enum class Device : uint8_t { cpu, cuda };

class Shape {
 public:
  Shape() = default;
  Shape(std::initializer_list<int64_t> d) : dims_(d) {}
  explicit Shape(std::vector<int64_t> d) : dims_(std::move(d)) {}
  int rank() const { return static_cast<int>(dims_.size()); }
  int64_t operator[](int i) const { return dims_[static_cast<size_t>(i < 0 ? i + rank() : i)]; }
  int64_t numel() const;
  const std::vector<int64_t>& dims() const { return dims_; }
  bool operator==(const Shape& o) const { return dims_ == o.dims_; }
  std::string str() const;  // "[2, 3]"

 private:
  std::vector<int64_t> dims_;
};

// A block of memory on a device. Allocated here (64-byte aligned, zeroed) or adopted with a deleter.
struct Storage {
  void* data = nullptr;
  size_t bytes = 0;
  Device device = Device::cpu;
  void (*free_fn)(void*, size_t) = nullptr;
  ~Storage();
  static std::shared_ptr<Storage> allocate(size_t bytes, Device device = Device::cpu);
};

void* aligned_alloc_bytes(size_t bytes);  // 64-byte aligned, zeroed; throws on failure
void aligned_free_bytes(void* p, size_t bytes);

class Tensor {
 public:
  Tensor() = default;
  static Tensor empty(const Shape& shape, DType dtype = DType::f32, Device device = Device::cpu);
  static Tensor zeros(const Shape& shape, DType dtype = DType::f32, Device device = Device::cpu);
  // Non-owning view of external memory; `keep` (optional) keeps the owner alive (e.g. an mmap).
  static Tensor wrap(void* data, const Shape& shape, DType dtype, Device device = Device::cpu,
                     std::shared_ptr<void> keep = nullptr);

  const Shape& shape() const { return shape_; }
  int64_t dim(int i) const { return shape_[i]; }
  int rank() const { return shape_.rank(); }
  int64_t numel() const { return shape_.numel(); }
  DType dtype() const { return dtype_; }
  Device device() const { return device_; }
  size_t nbytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype_); }
  bool defined() const { return data_ != nullptr || numel() == 0; }
  bool owns_memory() const { return storage_ != nullptr; }

  void* raw() const { return data_; }
  template <class T>
  T* data() const {
    return static_cast<T*>(data_);
  }
  template <class T>
  T* checked_data(DType expect) const {
    TEMPER_CHECK(dtype_ == expect) << "tensor has dtype " << dtype_name(dtype_) << ", expected " << dtype_name(expect);
    return static_cast<T*>(data_);
  }

  Tensor slice(int64_t begin, int64_t end) const;  // rows [begin, end) of dim 0, a view
  Tensor reshape(const Shape& shape) const;        // same numel, a view
  Tensor clone() const;
  Tensor to(DType dtype) const;  // converting copy among f32/bf16/f16/f64 (CPU)
  void fill_zero();

 private:
  std::shared_ptr<Storage> storage_;
  std::shared_ptr<void> keep_;
  void* data_ = nullptr;
  Shape shape_;
  DType dtype_ = DType::f32;
  Device device_ = Device::cpu;
};

}  // namespace temper
