// Fuzz harness: any bytes as a safetensors file must either open (and every tensor view stay inside
// the file) or throw temper::Error; never crash, hang or read out of bounds.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <string>

#include "fuzz_util.h"
#include "temper/core/error.h"
#include "temper/io/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string path = temper::fuzz::write_temp(data, size, "st");
  try {
    auto f = temper::io::SafetensorsFile::open(path);
    for (const auto& n : f.names()) {
      temper::Tensor t = f.get(n);
      const auto* p = static_cast<const volatile uint8_t*>(t.raw());
      uint8_t sink = 0;
      for (size_t i = 0; i < t.nbytes(); i += 4096) sink = static_cast<uint8_t>(sink ^ p[i]);  // touch every page
      if (t.nbytes()) sink = static_cast<uint8_t>(sink ^ p[t.nbytes() - 1]);
      (void)sink;
    }
  } catch (const temper::Error&) {
  }
  ::unlink(path.c_str());
  return 0;
}
