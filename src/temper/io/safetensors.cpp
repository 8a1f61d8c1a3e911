#include "temper/io/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <tuple>
#include <nlohmann/json.hpp>

#include "temper/core/error.h"
#include "temper/io/file_map.h"

namespace temper::io {
namespace {

bool st_dtype(const std::string& s, DType* out) {
  if (s == "F32") *out = DType::f32;
  else if (s == "F64") *out = DType::f64;
  else if (s == "BF16") *out = DType::bf16;
  else if (s == "F16") *out = DType::f16;
  else if (s == "I32") *out = DType::i32;
  else if (s == "I64") *out = DType::i64;
  else if (s == "U8") *out = DType::u8;
  else return false;
  return true;
}

}  // namespace

SafetensorsFile SafetensorsFile::open(const std::string& path) {
  FileBytes fb = file_bytes(path, 8, "a safetensors header (8-byte length)");
  size_t size = fb.size;
  SafetensorsFile f;
  f.path_ = path;
  f.map_ = fb.keep;
  f.mapped_ = fb.mapped;
  const char* base = reinterpret_cast<const char*>(fb.data);
  uint64_t hlen;
  std::memcpy(&hlen, base, 8);
  TEMPER_CHECK(hlen <= size - 8) << path << ": header length " << hlen << " exceeds the file size " << size;
  nlohmann::json h;
  try {
    h = nlohmann::json::parse(base + 8, base + 8 + hlen);
  } catch (const std::exception& e) {
    TEMPER_FAIL() << path << ": header is not valid JSON: " << e.what();
  }
  TEMPER_CHECK(h.is_object()) << path << ": header must be a JSON object";
  const char* data = base + 8 + hlen;
  size_t data_size = size - 8 - hlen;
  std::vector<std::tuple<uint64_t, uint64_t, std::string>> ranges;
  for (auto& [name, v] : h.items()) {
    if (name == "__metadata__") {
      TEMPER_CHECK(v.is_object()) << path << ": __metadata__ must be an object";
      for (auto& [k, mv] : v.items()) f.metadata_[k] = mv.is_string() ? mv.get<std::string>() : mv.dump();
      continue;
    }
    TEMPER_CHECK(v.is_object() && v.contains("dtype") && v.contains("shape") && v.contains("data_offsets"))
        << path << ": tensor '" << name << "' needs dtype, shape and data_offsets";
    DType dt;
    std::string ds = v["dtype"].is_string() ? v["dtype"].get<std::string>() : "?";
    TEMPER_CHECK(st_dtype(ds, &dt)) << path << ": tensor '" << name << "' has unsupported dtype '" << ds
                                    << "' (expected F32, F64, BF16, F16, I32, I64 or U8)";
    std::vector<int64_t> dims;
    TEMPER_CHECK(v["shape"].is_array()) << path << ": tensor '" << name << "' shape must be a list, got " << v["shape"].dump();
    for (auto& d : v["shape"]) {
      TEMPER_CHECK(d.is_number_integer() && d.get<int64_t>() >= 0) << path << ": tensor '" << name << "' has a bad shape";
      dims.push_back(d.get<int64_t>());
    }
    auto& off = v["data_offsets"];
    TEMPER_CHECK(off.is_array() && off.size() == 2 && off[0].is_number_unsigned() && off[1].is_number_unsigned())
        << path << ": tensor '" << name << "' data_offsets must be [begin, end]";
    uint64_t b = off[0].get<uint64_t>(), e = off[1].get<uint64_t>();
    Shape shape(dims);
    uint64_t want = dtype_size(dt);
    for (int64_t d : dims)
      TEMPER_CHECK(!__builtin_mul_overflow(want, static_cast<uint64_t>(d), &want))
          << path << ": tensor '" << name << "' shape " << shape.str() << " overflows 64-bit sizes";
    TEMPER_CHECK(b <= e && e <= data_size) << path << ": tensor '" << name << "' data_offsets [" << b << ", " << e
                                           << "] outside the data region of " << data_size << " bytes";
    TEMPER_CHECK(e - b == want) << path << ": tensor '" << name << "' shape " << shape.str() << " " << ds << " needs "
                                << want << " bytes, data_offsets give " << e - b;
    f.tensors_[name] = Tensor::wrap(const_cast<char*>(data + b), shape, dt, Device::cpu, f.map_);
    ranges.emplace_back(b, e, name);
  }
  // As the reference reader (safetensors' Metadata::validate): the tensors, in offset order, tile the data region
  // from 0 with no gap and no overlap, and end where the file ends (the header may be padded, the data not).
  std::sort(ranges.begin(), ranges.end());
  uint64_t end = 0;  // of the tensors so far
  for (size_t i = 0; i < ranges.size(); ++i) {
    const auto& [b, e, name] = ranges[i];
    TEMPER_CHECK(b >= end) << path << ": tensors '" << std::get<2>(ranges[i - 1]) << "' [" << std::get<0>(ranges[i - 1])
                           << ", " << std::get<1>(ranges[i - 1]) << ") and '" << name << "' [" << b << ", " << e
                           << ") overlap";
    TEMPER_CHECK(b == end) << path << ": bytes [" << end << ", " << b << ") of the data region belong to no tensor ('"
                           << name << "' starts at " << b << "); safetensors tensors are stored back to back from 0";
    end = e;
  }
  TEMPER_CHECK(end == data_size) << path << ": the header describes " << end << " bytes of tensor data, the file holds "
                                 << data_size << " after the header (" << data_size - end
                                 << " bytes after the last tensor); a safetensors file ends with its last tensor";
  return f;
}

Tensor SafetensorsFile::get(const std::string& name) const {
  auto it = tensors_.find(name);
  TEMPER_CHECK(it != tensors_.end()) << path_ << ": no tensor named '" << name << "'";
  return it->second;
}

void SafetensorsFile::release(const std::string& name) const {
  const Tensor t = get(name);
  file_bytes_release(mapped_, t.raw(), t.nbytes());
}

std::vector<std::string> SafetensorsFile::names() const {
  std::vector<std::string> v;
  for (auto& [k, t] : tensors_) v.push_back(k);
  return v;
}

void copy_to_f32(const Tensor& src, float* dst, int64_t n, const std::string& what) {
  TEMPER_CHECK(src.numel() == n) << what << ": has " << src.numel() << " elements (shape " << src.shape().str()
                                 << "), expected " << n;
  switch (src.dtype()) {
    case DType::f32: std::memcpy(dst, src.raw(), static_cast<size_t>(n) * 4); break;
    case DType::f64:
      for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<float>(src.data<double>()[i]);
      break;
    case DType::bf16:
      for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(src.data<uint16_t>()[i]);
      break;
    case DType::f16:
      for (int64_t i = 0; i < n; ++i) dst[i] = f16_to_f32(src.data<uint16_t>()[i]);
      break;
    default: TEMPER_FAIL() << what << ": dtype " << dtype_name(src.dtype()) << " is not a float type";
  }
}

}  // namespace temper::io
