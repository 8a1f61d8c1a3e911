// UTF-8 decoding with the maximal-subpart rule (Unicode ch. 3, "U+FFFD substitution"); see utf8.h.
#include "temper/text/utf8.h"

namespace temper::text {

namespace {

// Expected continuation count and the allowed range of the first continuation byte for a lead.
struct Lead {
  int n;  // continuation bytes, -1 = never valid as a lead
  unsigned char lo, hi;
};

Lead lead_info(unsigned char b) {
  if (b < 0x80) return {0, 0, 0};
  if (b < 0xC2) return {-1, 0, 0};  // continuation bytes, overlong C0/C1
  if (b < 0xE0) return {1, 0x80, 0xBF};
  if (b == 0xE0) return {2, 0xA0, 0xBF};
  if (b == 0xED) return {2, 0x80, 0x9F};  // no surrogates
  if (b < 0xF0) return {2, 0x80, 0xBF};
  if (b == 0xF0) return {3, 0x90, 0xBF};
  if (b < 0xF4) return {3, 0x80, 0xBF};
  if (b == 0xF4) return {3, 0x80, 0x8F};
  return {-1, 0, 0};
}

}  // namespace

Utf8Char utf8_next(std::string_view s, size_t i) {
  const auto b0 = static_cast<unsigned char>(s[i]);
  const Lead L = lead_info(b0);
  if (L.n == 0) return {b0, 1, true};
  if (L.n < 0) return {kReplacementChar, 1, false};
  char32_t cp = b0 & (0x3F >> L.n);
  for (int k = 1; k <= L.n; ++k) {
    if (i + k >= s.size()) return {kReplacementChar, k, false};
    const auto b = static_cast<unsigned char>(s[i + k]);
    const unsigned char lo = k == 1 ? L.lo : 0x80, hi = k == 1 ? L.hi : 0xBF;
    if (b < lo || b > hi) return {kReplacementChar, k, false};
    cp = (cp << 6) | (b & 0x3F);
  }
  return {cp, L.n + 1, true};
}

void utf8_append(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

std::string utf8_lossy(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  size_t i = 0;
  while (i < bytes.size()) {
    const Utf8Char c = utf8_next(bytes, i);
    if (c.valid) {
      out.append(bytes.data() + i, c.len);
    } else {
      utf8_append(out, kReplacementChar);
    }
    i += c.len;
  }
  return out;
}

bool utf8_valid(std::string_view bytes) {
  for (size_t i = 0; i < bytes.size();) {
    const Utf8Char c = utf8_next(bytes, i);
    if (!c.valid) return false;
    i += c.len;
  }
  return true;
}

size_t utf8_incomplete_tail(std::string_view bytes) {
  const size_t n = bytes.size();
  for (size_t back = 1; back <= 3 && back <= n; ++back) {
    const auto b = static_cast<unsigned char>(bytes[n - back]);
    if ((b & 0xC0) == 0x80) continue;  // continuation: look further back for the lead
    const Lead L = lead_info(b);
    if (L.n <= 0 || static_cast<size_t>(L.n) < back) return 0;  // ASCII, invalid lead or complete
    // A lead with fewer bytes after it than it needs: unfinished if every byte so far is allowed.
    const Utf8Char c = utf8_next(bytes, n - back);
    return (!c.valid && static_cast<size_t>(c.len) == back) ? back : 0;
  }
  return 0;
}

bool is_unicode_whitespace(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

bool is_python_whitespace(char32_t c) {
  return is_unicode_whitespace(c) || (c >= 0x1C && c <= 0x1F);
}

}  // namespace temper::text
