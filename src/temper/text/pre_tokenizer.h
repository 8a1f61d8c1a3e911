// Pre-tokenization of byte-level BPE: the text between added tokens is split into words by a
// sequence of regex splits (tokenizers' Split with behavior "Isolated", Digits), then by the
// ByteLevel step (optional prefix space, optional GPT-2 regex); BPE then runs on each word.
// Known names (GGUF tokenizer.ggml.pre, as llama.cpp spells them) and their regexes: see
// pre_tokenizer_by_name and docs/TOKENIZER.md. Leaves out: other split behaviours (Removed,
// MergedWith*, Contiguous), inverted splits, Metaspace/Whitespace/BERT pre-tokenizers.
#pragma once

#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "temper/text/regex.h"

namespace temper::text {

// Regexes as the models' tokenizer.json carry them.
inline constexpr const char* kRegexGpt2 =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
inline constexpr const char* kRegexLlama3 =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
inline constexpr const char* kRegexQwen2 =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// How a split step is written in tokenizer.json (kept for export; all of them split the same way).
enum class SplitKind {
  kRegex,             // Split {"Regex": pattern}
  kString,            // Split {"String": text} (a literal)
  kDigitsIndividual,  // Digits(individual_digits=true): an isolated \p{N} split
  kDigitsContiguous,  // Digits(individual_digits=false): an isolated \p{N}+ split
};

struct SplitStep {
  Regex regex;
  SplitKind kind = SplitKind::kRegex;
};

class PreTokenizer {
 public:
  // One Split step (behavior Isolated: matches and the text between them are both words).
  void add_split(Regex regex);
  // tokenizers' Digits: every digit (individual) or every run of digits is a word of its own.
  void add_digits(bool individual);
  // The final ByteLevel step; with use_regex the GPT-2 regex splits each word once more.
  void set_byte_level(bool add_prefix_space, bool use_regex);
  bool has_byte_level() const { return byte_level_; }

  // The configuration, for export.
  const std::vector<SplitStep>& splits() const { return splits_; }
  bool add_prefix_space() const { return add_prefix_space_; }
  bool byte_level_regex() const { return byte_level_regex_ != nullptr; }
  // Same words for every input: the same split patterns (Digits and the equal Split regex count as
  // one) and the same ByteLevel options.
  bool equivalent(const PreTokenizer& other) const;

  // Appends the words of `text` to `words`, in order. Words are raw bytes (the byte-level mapping
  // happens in BPE) that view `text`, or `storage` where add_prefix_space made a new string.
  void split(std::string_view text, std::vector<std::string_view>& words, std::deque<std::string>& storage) const;

  // Describes the steps, e.g. "Split(/\p{N}/) -> ByteLevel(regex)" (for messages and tests).
  std::string describe() const;

 private:
  std::vector<SplitStep> splits_;
  bool byte_level_ = false;
  bool add_prefix_space_ = false;
  std::unique_ptr<Regex> byte_level_regex_;
};

// The pre-tokenizer of a named family; throws temper::Error listing the known names otherwise.
// Also reports whether the family ignores merges for whole-vocabulary words (Llama-3).
PreTokenizer pre_tokenizer_by_name(const std::string& name, bool* ignore_merges = nullptr);
std::vector<std::string> pre_tokenizer_names();
// The llama.cpp name (tokenizer.ggml.pre) whose pre-tokenizer and ignore_merges equal these: gpt2,
// smollm, llama-bpe or qwen2 (the names llama.cpp's convert_hf_to_gguf.py writes); "" if none.
std::string pre_tokenizer_name_of(const PreTokenizer& pre, bool ignore_merges);

}  // namespace temper::text
