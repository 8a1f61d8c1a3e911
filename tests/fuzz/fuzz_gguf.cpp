// Fuzz harness: any bytes as a GGUF file must either open (metadata readable, every tensor's data
// inside the file and dequantizable or refused with an Error) or throw temper::Error.
#include <unistd.h>

#include <cstdint>
#include <string>
#include <vector>

#include "fuzz_util.h"
#include "temper/core/error.h"
#include "temper/io/gguf_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string path = temper::fuzz::write_temp(data, size, "gguf");
  try {
    auto f = temper::io::GgufFile::open(path);
    for (const auto& kv : f.metadata()) (void)kv.second.describe();
    std::vector<float> buf;
    for (const auto& t : f.tensors()) {
      try {
        int64_t n = t.shape().numel();
        if (n > 0 && n <= (int64_t{1} << 20)) {
          buf.resize(static_cast<size_t>(n));
          f.dequantize_into(t.name, buf.data(), n);
        }
      } catch (const temper::Error&) {
      }
    }
  } catch (const temper::Error&) {
  }
  ::unlink(path.c_str());
  return 0;
}
