// UTF-8 helpers for the tokenizer: decode one code point, lossy conversion and the incomplete tail
// a streaming decoder must hold back. Invalid input follows Unicode's "maximal subpart" rule (one
// U+FFFD per maximal invalid subpart), which is what Rust's String::from_utf8_lossy does and so
// what Hugging Face tokenizers' decode returns. No normalisation (NFC etc.) here.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace temper::text {

inline constexpr char32_t kReplacementChar = 0xFFFD;

struct Utf8Char {
  char32_t cp;  // the code point, or kReplacementChar where invalid
  int len;      // bytes consumed (>= 1): the sequence, or the maximal invalid subpart
  bool valid;
};

// Decodes the code point starting at s[i] (i < s.size()).
Utf8Char utf8_next(std::string_view s, size_t i);

// Appends the UTF-8 encoding of cp (cp <= 0x10FFFF).
void utf8_append(std::string& out, char32_t cp);

// Valid UTF-8 copy of bytes: every maximal invalid subpart becomes U+FFFD.
std::string utf8_lossy(std::string_view bytes);

bool utf8_valid(std::string_view bytes);

// Length (0..3) of a trailing sequence that is a valid but unfinished UTF-8 prefix ("\xF0\x9F" is
// one; "\xF0\x41" is not: that is invalid, not unfinished).
size_t utf8_incomplete_tail(std::string_view bytes);

// Unicode White_Space (what Rust's char::is_whitespace and regex \s test).
bool is_unicode_whitespace(char32_t cp);

// Python's str.isspace (what Jinja's trim filter strips): White_Space plus U+001C..U+001F.
bool is_python_whitespace(char32_t cp);

}  // namespace temper::text
