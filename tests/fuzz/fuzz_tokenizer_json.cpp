// Fuzz harness: any bytes as tokenizer.json must build a tokenizer (which then encodes and decodes
// a fixed hostile string without crashing) or throw temper::Error.
#include <cstdint>
#include <string_view>

#include "temper/core/error.h"
#include "temper/text/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view json(reinterpret_cast<const char*>(data), size);
  try {
    auto tok = temper::text::Tokenizer::from_hf_json(json, "", "fuzz/tokenizer.json");
    auto ids = tok.encode("Hello  world 123 \xF0\x9F\x9A\x80 <|im_start|>x\n\t\xE4\xBD\xA0\xE5\xA5\xBD", true);
    (void)tok.decode(ids);
  } catch (const temper::Error&) {
  }
  return 0;
}
