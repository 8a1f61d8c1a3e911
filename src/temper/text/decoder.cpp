// Decoder steps (see decoder.h), each as tokenizers 0.21's decoders/*.rs decode_chain.
#include "temper/text/decoder.h"

#include "temper/text/byte_level.h"
#include "temper/text/normalizer.h"
#include "temper/text/utf8.h"

namespace temper::text {

namespace {

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::vector<std::string> byte_fallback(std::vector<std::string> tokens) {
  std::vector<std::string> out;
  out.reserve(tokens.size());
  std::string run;  // bytes of consecutive <0xAB> tokens
  size_t run_tokens = 0;
  auto flush = [&] {
    if (run_tokens == 0) return;
    if (utf8_valid(run)) {
      out.push_back(run);
    } else {
      for (size_t k = 0; k < run_tokens; ++k) out.emplace_back("\xEF\xBF\xBD");  // one U+FFFD per byte token
    }
    run.clear();
    run_tokens = 0;
  };
  for (std::string& t : tokens) {
    const int b = byte_fallback_value(t);
    if (b >= 0) {
      run.push_back(static_cast<char>(b));
      ++run_tokens;
      continue;
    }
    flush();
    out.push_back(std::move(t));
  }
  flush();
  return out;
}

// Splits s into UTF-8 characters (an invalid byte is a character of its own).
std::vector<std::string_view> chars_of(std::string_view s) {
  std::vector<std::string_view> cs;
  for (size_t i = 0; i < s.size();) {
    const Utf8Char c = utf8_next(s, i);
    cs.push_back(s.substr(i, c.len));
    i += c.len;
  }
  return cs;
}

std::string strip(const std::string& token, const std::string& ch, int32_t start, int32_t stop) {
  const std::vector<std::string_view> cs = chars_of(token);
  size_t b = 0, e = cs.size();
  for (int32_t k = 0; k < start && b < e && cs[b] == ch; ++k) ++b;
  for (int32_t k = 0; k < stop && e > b && cs[e - 1] == ch; ++k) --e;
  std::string out;
  for (size_t k = b; k < e; ++k) out.append(cs[k]);
  return out;
}

std::string metaspace(const std::string& token, const std::string& replacement, bool drop) {
  return replace_all(token, replacement, drop ? "" : " ");
}

std::string join(const std::vector<std::string>& tokens) {
  std::string s;
  for (const std::string& t : tokens) s += t;
  return s;
}

}  // namespace

int byte_fallback_value(const std::string& token) {
  if (token.size() != 6 || token.compare(0, 3, "<0x") != 0 || token[5] != '>') return -1;
  const int hi = hex_digit(token[3]), lo = hex_digit(token[4]);
  return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

bool Decoder::has(DecoderKind kind) const {
  for (const DecoderStep& s : steps_) {
    if (s.kind == kind) return true;
  }
  return false;
}

std::string Decoder::decode(std::vector<std::string> tokens) const {
  for (const DecoderStep& s : steps_) {
    switch (s.kind) {
      case DecoderKind::kByteLevel:
        tokens = {utf8_lossy(byte_level_decode_token(join(tokens)))};
        break;
      case DecoderKind::kByteFallback:
        tokens = byte_fallback(std::move(tokens));
        break;
      case DecoderKind::kFuse:
        tokens = {join(tokens)};
        break;
      case DecoderKind::kReplace:
        for (std::string& t : tokens) t = replace_all(t, s.pattern, s.content);
        break;
      case DecoderKind::kStrip:
        for (std::string& t : tokens) t = strip(t, s.content, s.start, s.stop);
        break;
      case DecoderKind::kMetaspace:
        for (size_t i = 0; i < tokens.size(); ++i) {
          tokens[i] = metaspace(tokens[i], s.pattern, i == 0 && s.scheme != PrependScheme::kNever);
        }
        break;
    }
  }
  return join(tokens);
}

std::string Decoder::token_bytes(const std::string& token) const {
  std::string t = token;
  for (const DecoderStep& s : steps_) {
    switch (s.kind) {
      case DecoderKind::kByteLevel:
        t = byte_level_decode_token(t);
        break;
      case DecoderKind::kByteFallback:
        if (byte_fallback_value(t) >= 0) return std::string(1, static_cast<char>(byte_fallback_value(t)));
        break;
      case DecoderKind::kReplace:
        t = replace_all(t, s.pattern, s.content);
        break;
      case DecoderKind::kMetaspace:
        t = metaspace(t, s.pattern, false);
        break;
      case DecoderKind::kFuse:
      case DecoderKind::kStrip:
        break;
    }
  }
  return t;
}

std::string Decoder::describe() const {
  static const char* kNames[] = {"ByteLevel", "ByteFallback", "Fuse", "Replace", "Strip", "Metaspace"};
  std::string d;
  for (const DecoderStep& s : steps_) d += (d.empty() ? "" : " -> ") + std::string(kNames[static_cast<int>(s.kind)]);
  return d.empty() ? "(none)" : d;
}

}  // namespace temper::text
