#include "temper/io/safetensors_writer.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "temper/core/error.h"
#include "temper/io/atomic_file.h"

namespace temper::io {
namespace {
const char* st_name(DType t) {
  switch (t) {
    case DType::f32: return "F32";
    case DType::bf16: return "BF16";
    case DType::f16: return "F16";
    case DType::f64: return "F64";
    case DType::i32: return "I32";
    case DType::i64: return "I64";
    case DType::u8: return "U8";
  }
  return "?";
}
}  // namespace

void write_safetensors(const std::string& path, const std::vector<NamedTensor>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  std::vector<const NamedTensor*> order;
  std::set<std::string> seen;
  for (const auto& t : tensors) {
    TEMPER_CHECK(seen.insert(t.name).second) << path << ": tensor '" << t.name << "' given twice";
    TEMPER_CHECK(t.tensor.device() == Device::cpu) << path << ": tensor '" << t.name << "' is not on the CPU";
    order.push_back(&t);
  }
  std::sort(order.begin(), order.end(), [](auto* a, auto* b) { return a->name < b->name; });
  nlohmann::ordered_json h;
  if (!metadata.empty()) {
    nlohmann::ordered_json m;
    for (auto& [k, v] : metadata) m[k] = v;
    h["__metadata__"] = m;
  }
  uint64_t off = 0;
  for (auto* t : order) {
    std::vector<int64_t> dims = t->tensor.shape().dims();
    uint64_t n = t->tensor.nbytes();
    h[t->name] = {{"dtype", st_name(t->tensor.dtype())}, {"shape", dims}, {"data_offsets", {off, off + n}}};
    off += n;
  }
  std::string header = h.dump();
  header.append((8 - header.size() % 8) % 8, ' ');
  write_file_atomic(path, [&](const std::string& tmp) {
    std::ofstream f(tmp, std::ios::binary);
    TEMPER_CHECK(f.good()) << tmp << ": cannot create (" << std::strerror(errno) << ")";
    uint64_t hlen = header.size();
    f.write(reinterpret_cast<const char*>(&hlen), 8);
    f.write(header.data(), static_cast<std::streamsize>(header.size()));
    for (auto* t : order) f.write(static_cast<const char*>(t->tensor.raw()), static_cast<std::streamsize>(t->tensor.nbytes()));
    f.flush();
    TEMPER_CHECK(f.good()) << tmp << ": write failed (disk full?)";
  });
}

}  // namespace temper::io
