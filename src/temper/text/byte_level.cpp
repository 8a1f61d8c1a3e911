// The GPT-2 byte <-> code point table (see byte_level.h), built once.
#include "temper/text/byte_level.h"

#include <array>

#include "temper/text/utf8.h"

namespace temper::text {

namespace {

struct Tables {
  std::array<char32_t, 256> to_cp{};
  std::array<int16_t, 324> to_byte{};  // code points 0..323 (U+0143 is the largest used)
  std::array<std::string, 256> utf8{};
  Tables() {
    to_byte.fill(-1);
    int extra = 0;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      to_cp[b] = printable ? static_cast<char32_t>(b) : static_cast<char32_t>(256 + extra++);
      to_byte[to_cp[b]] = static_cast<int16_t>(b);
      utf8_append(utf8[b], to_cp[b]);
    }
  }
};

const Tables& tables() {
  static const Tables t;
  return t;
}

}  // namespace

char32_t byte_level_char(uint8_t b) {
  return tables().to_cp[b];
}

int byte_level_byte(char32_t cp) {
  return cp < 324 ? tables().to_byte[cp] : -1;
}

std::string byte_level_encode(std::string_view bytes) {
  const Tables& t = tables();
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char b : bytes) out += t.utf8[b];
  return out;
}

std::string byte_level_decode_token(std::string_view token) {
  std::string out;
  out.reserve(token.size());
  for (size_t i = 0; i < token.size();) {
    const Utf8Char c = utf8_next(token, i);
    const int b = c.valid ? byte_level_byte(c.cp) : -1;
    if (b < 0) return std::string(token);
    out += static_cast<char>(b);
    i += c.len;
  }
  return out;
}

}  // namespace temper::text
