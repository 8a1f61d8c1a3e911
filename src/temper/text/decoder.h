// The decoder chain of a Hugging Face tokenizer.json for SentencePiece-style tokenizers: each step
// maps the list of token strings to a new list, then the list is joined (tokenizers'
// Decoder::decode_chain). Steps: ByteFallback ("<0xAB>" runs become their bytes if valid UTF-8, else
// one U+FFFD per byte), Fuse, Replace (literal), Strip (up to start/stop copies of one character
// from each token's ends), Metaspace (replacement -> ' ', dropped from the first token unless
// prepend_scheme is never), ByteLevel (the byte-level alphabet back to bytes, lossy UTF-8).
// Leaves out: WordPiece, BPEDecoder, CTC decoders.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "temper/text/pre_tokenizer.h"

namespace temper::text {

enum class DecoderKind { kByteLevel, kByteFallback, kFuse, kReplace, kStrip, kMetaspace };

struct DecoderStep {
  DecoderKind kind = DecoderKind::kFuse;
  std::string pattern;          // kReplace: the literal replaced; kMetaspace: the replacement character
  std::string content;          // kReplace: the replacement; kStrip: the character stripped
  int32_t start = 0, stop = 0;  // kStrip
  PrependScheme scheme = PrependScheme::kAlways;  // kMetaspace
  bool split = true;                              // kMetaspace (kept for export)
};

// A step with its kind and strings (the other fields at their defaults).
inline DecoderStep decoder_step(DecoderKind kind, std::string pattern = {}, std::string content = {}) {
  DecoderStep s;
  s.kind = kind;
  s.pattern = std::move(pattern);
  s.content = std::move(content);
  return s;
}

class Decoder {
 public:
  void add(DecoderStep step) { steps_.push_back(std::move(step)); }
  const std::vector<DecoderStep>& steps() const { return steps_; }
  bool has(DecoderKind kind) const;
  // The decoded text of the token strings (added tokens as written).
  std::string decode(std::vector<std::string> tokens) const;
  // What one token decodes to on its own, as bytes: ByteFallback tokens their byte, Replace and
  // Metaspace applied (no Strip, no first-token rule), the byte-level alphabet mapped back.
  std::string token_bytes(const std::string& token) const;
  std::string describe() const;

 private:
  std::vector<DecoderStep> steps_;
};

// The byte of a "<0xAB>" token (tokenizers' ByteFallback reading: 6 characters, two hex digits), or -1.
int byte_fallback_value(const std::string& token);

}  // namespace temper::text
