// GPT-2's byte-level alphabet: every byte 0..255 is shown as one printable code point (printable
// Latin-1 bytes stand for themselves, the rest map to U+0100..U+0143, e.g. space -> 'Ġ' U+0120).
// BPE vocabularies of byte-level tokenizers are written in this alphabet. Follows
// bytes_to_unicode() of openai/gpt-2 encoder.py and tokenizers' ByteLevel pre-tokenizer/decoder.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace temper::text {

// The code point that stands for byte b.
char32_t byte_level_char(uint8_t b);

// The byte a code point stands for, or -1 if cp is not in the alphabet.
int byte_level_byte(char32_t cp);

// Raw bytes -> their byte-level string (each byte becomes one code point, UTF-8 encoded).
std::string byte_level_encode(std::string_view bytes);

// Byte-level string -> raw bytes, as tokenizers' ByteLevel decoder does it per token: if every code
// point of `token` is in the alphabet the mapped bytes, otherwise the token's own bytes unchanged
// (added tokens such as "<|im_start|>" are ASCII and map to themselves either way).
std::string byte_level_decode_token(std::string_view token);

}  // namespace temper::text
