// Normalizers of Hugging Face tokenizers, applied to the text between added tokens before the
// pre-tokenizer: NFC (utf8proc), Prepend (SentencePiece's "▁" prefix: only to non-empty text) and
// Replace with a literal pattern (" " -> "▁"), in sequence, as Llama-2/Mistral/Phi-3 (Prepend +
// Replace) and Gemma (Replace) tokenizer.json files carry them. Leaves out: NFD/NFKC/NFKD,
// Lowercase, Strip, regex Replace, Precompiled (SentencePiece's charsmap), BERT's normalizer.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace temper::text {

enum class NormalizerKind { kNfc, kPrepend, kReplace };

struct NormalizerStep {
  NormalizerKind kind = NormalizerKind::kNfc;
  std::string pattern;  // kReplace: the literal replaced
  std::string content;  // kPrepend: the prefix; kReplace: the replacement
};

class Normalizer {
 public:
  void add_nfc() { steps_.push_back({NormalizerKind::kNfc, "", ""}); }
  void add_prepend(std::string prefix) { steps_.push_back({NormalizerKind::kPrepend, "", std::move(prefix)}); }
  // pattern must not be empty.
  void add_replace(std::string pattern, std::string content);

  bool empty() const { return steps_.empty(); }
  const std::vector<NormalizerStep>& steps() const { return steps_; }
  // The text after every step, in order.
  std::string apply(std::string_view text) const;
  // e.g. "Prepend(▁) -> Replace(' ' -> ▁)", for messages.
  std::string describe() const;

 private:
  std::vector<NormalizerStep> steps_;
};

// Unicode NFC via utf8proc; text that is not valid UTF-8 is returned as it is.
std::string nfc_normalize(std::string_view s);
// Every non-overlapping occurrence of pattern (non-empty), left to right, replaced by content.
std::string replace_all(std::string_view s, std::string_view pattern, std::string_view content);

}  // namespace temper::text
