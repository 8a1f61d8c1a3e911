// A compiled PCRE2 regular expression in UTF + UCP mode (\p{L}, \s, \w are Unicode-aware), JIT-
// compiled where the library supports it. Invalid UTF-8 in the subject never matches (PCRE2's
// MATCH_INVALID_UTF) instead of failing, so byte-level tokenizers still see every byte.
// Leaves out: replacement, captures. Hugging Face tokenizers uses Oniguruma; the patterns we use
// (GPT-2, Llama-3, Qwen2 pre-tokenizers) mean the same in both.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace temper::text {

class Regex {
 public:
  // Throws temper::Error naming `what` (e.g. "tokenizer.json: pre_tokenizer.pattern.Regex") and the
  // PCRE2 message with the offset if the pattern does not compile. literal=true matches the string.
  Regex(const std::string& pattern, const std::string& what, bool literal = false);
  ~Regex();
  Regex(Regex&&) noexcept;
  Regex& operator=(Regex&&) noexcept;
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // Appends the [begin, end) byte ranges of successive non-overlapping matches in s to out
  // (an empty match advances by one character and is not reported).
  void find_all(std::string_view s, std::vector<std::pair<size_t, size_t>>& out) const;

  // True if the pattern matches starting exactly at byte offset `at` of s.
  bool matches_at(std::string_view s, size_t at) const;

  const std::string& pattern() const { return pattern_; }
  bool literal() const { return literal_; }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::string pattern_;
  bool literal_ = false;
};

}  // namespace temper::text
