// UTF-8 and byte-level helpers: maximal-subpart replacement (what Rust's from_utf8_lossy and so
// HF decode do), the unfinished tail a stream decoder holds back, GPT-2's byte alphabet.
#include <gtest/gtest.h>

#include <set>

#include "temper/text/byte_level.h"
#include "temper/text/utf8.h"

using namespace temper::text;

namespace {

const std::string kFffd = "\xEF\xBF\xBD";

TEST(Utf8, Next) {
  const std::string s = "a\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80";
  Utf8Char c = utf8_next(s, 0);
  EXPECT_EQ(c.cp, U'a');
  c = utf8_next(s, 1);
  EXPECT_EQ(c.cp, U'\u00E9');
  EXPECT_EQ(c.len, 2);
  c = utf8_next(s, 3);
  EXPECT_EQ(c.cp, U'\u20AC');
  c = utf8_next(s, 6);
  EXPECT_EQ(c.cp, U'\U0001F600');
  EXPECT_EQ(c.len, 4);
  EXPECT_TRUE(utf8_valid(s));
}

TEST(Utf8, LossyMaximalSubparts) {
  // The examples of Unicode's "U+FFFD substitution of maximal subparts" (and Rust's docs).
  EXPECT_EQ(utf8_lossy("\x61\xF1\x80\x80\xE1\x80\xC2\x62\x80\x63\x80\xBF\x64"),
            "a" + kFffd + kFffd + kFffd + "b" + kFffd + "c" + kFffd + kFffd + "d");
  EXPECT_EQ(utf8_lossy("\xC0\xAF"), kFffd + kFffd);                          // overlong lead
  EXPECT_EQ(utf8_lossy("\xED\xA0\x80"), kFffd + kFffd + kFffd);              // surrogate
  EXPECT_EQ(utf8_lossy("\xF4\x90\x80\x80"), kFffd + kFffd + kFffd + kFffd);  // > U+10FFFF
  EXPECT_EQ(utf8_lossy("\xF0\x9F\x98"), kFffd);                              // truncated at the end: one
  EXPECT_EQ(utf8_lossy("ok"), "ok");
  EXPECT_FALSE(utf8_valid("\xFF"));
}

TEST(Utf8, IncompleteTail) {
  EXPECT_EQ(utf8_incomplete_tail(""), 0u);
  EXPECT_EQ(utf8_incomplete_tail("abc"), 0u);
  EXPECT_EQ(utf8_incomplete_tail("a\xF0"), 1u);
  EXPECT_EQ(utf8_incomplete_tail("a\xF0\x9F"), 2u);
  EXPECT_EQ(utf8_incomplete_tail("a\xF0\x9F\x98"), 3u);
  EXPECT_EQ(utf8_incomplete_tail("a\xF0\x9F\x98\x80"), 0u);  // complete
  EXPECT_EQ(utf8_incomplete_tail("a\xE2\x82"), 2u);
  EXPECT_EQ(utf8_incomplete_tail("a\xF0\x41"), 0u);  // invalid, not unfinished
  EXPECT_EQ(utf8_incomplete_tail("a\xF0\x80"), 0u);  // F0 80 can never complete
  EXPECT_EQ(utf8_incomplete_tail("\x80\x80"), 0u);   // stray continuations
  EXPECT_EQ(utf8_incomplete_tail("\xFF"), 0u);
}

TEST(Utf8, Whitespace) {
  for (char32_t c : {U'\t', U'\n', U'\r', U' ', U'\u0085', U'\u00A0', U'\u2028', U'\u3000'}) {
    EXPECT_TRUE(is_unicode_whitespace(c)) << static_cast<int>(c);
  }
  EXPECT_FALSE(is_unicode_whitespace(U'\u200B'));  // zero-width space is not White_Space
  EXPECT_FALSE(is_unicode_whitespace(U'\u001C'));
  EXPECT_TRUE(is_python_whitespace(U'\u001C'));
}

TEST(ByteLevel, Alphabet) {
  std::set<char32_t> seen;
  for (int b = 0; b < 256; ++b) {
    const char32_t c = byte_level_char(static_cast<uint8_t>(b));
    EXPECT_TRUE(seen.insert(c).second);
    EXPECT_EQ(byte_level_byte(c), b);
  }
  EXPECT_EQ(byte_level_char(' '), U'\u0120');   // 'Ġ'
  EXPECT_EQ(byte_level_char('\n'), U'\u010A');  // 'Ċ'
  EXPECT_EQ(byte_level_char('a'), U'a');
  EXPECT_EQ(byte_level_char(0xAD), U'\u0143');  // the last extra symbol
  EXPECT_EQ(byte_level_byte(U'\u0144'), -1);
  EXPECT_EQ(byte_level_encode(" hi\n"), "\xC4\xA0hi\xC4\x8A");
  EXPECT_EQ(byte_level_decode_token("\xC4\xA0hi\xC4\x8A"), " hi\n");
  EXPECT_EQ(byte_level_decode_token("<|im_start|>"), "<|im_start|>");
  // A token with a symbol outside the alphabet is kept as its own bytes (tokenizers' ByteLevel decoder).
  EXPECT_EQ(byte_level_decode_token("a b"), "a b");
  EXPECT_EQ(byte_level_decode_token("\xE4\xB8\x96"), "\xE4\xB8\x96");
}

}  // namespace
