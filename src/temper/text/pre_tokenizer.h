// Pre-tokenization: the text between added tokens is split into words by a sequence of regex or
// literal splits (tokenizers' Split with behavior Isolated, MergedWithPrevious or MergedWithNext;
// Digits), then by the ByteLevel step (optional prefix space, optional GPT-2 regex) of byte-level
// BPE, or the Metaspace step of SentencePiece-style BPE (' ' -> replacement, the prefix by
// prepend_scheme, optional split before each replacement); no step at all leaves the text one
// word. BPE then runs on each word. Known names (GGUF tokenizer.ggml.pre, as llama.cpp spells
// them) and their regexes: see pre_tokenizer_by_name and docs/TOKENIZER.md. Leaves out: the
// Removed and Contiguous behaviours, inverted splits, Whitespace/BERT/Punctuation pre-tokenizers.
#pragma once

#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
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

// Where a match goes (tokenizers' SplitDelimiterBehavior).
enum class SplitBehavior { kIsolated, kMergedWithPrevious, kMergedWithNext };

struct SplitStep {
  Regex regex;
  SplitKind kind = SplitKind::kRegex;
  SplitBehavior behavior = SplitBehavior::kIsolated;
};

// Metaspace's prepend_scheme: the replacement is put before every word not starting with it
// (always), only before the text at the start of the input (first), or never.
enum class PrependScheme { kAlways, kFirst, kNever };

struct MetaspaceStep {
  std::string replacement = "\xE2\x96\x81";  // U+2581 '▁'
  PrependScheme scheme = PrependScheme::kAlways;
  bool split = true;  // a new word before each replacement (MergedWithNext)
};

class PreTokenizer {
 public:
  // One Split step (Isolated: matches and the text between them are both words; MergedWith*: a
  // match joins the word before / after it).
  void add_split(Regex regex, SplitBehavior behavior = SplitBehavior::kIsolated);
  // tokenizers' Digits: every digit (individual) or every run of digits is a word of its own.
  void add_digits(bool individual);
  // The final ByteLevel step; with use_regex the GPT-2 regex splits each word once more.
  void set_byte_level(bool add_prefix_space, bool use_regex);
  bool has_byte_level() const { return byte_level_; }
  // The final Metaspace step (instead of ByteLevel).
  void set_metaspace(MetaspaceStep step);
  const MetaspaceStep* metaspace() const { return metaspace_ ? &*metaspace_ : nullptr; }

  // The configuration, for export.
  const std::vector<SplitStep>& splits() const { return splits_; }
  bool add_prefix_space() const { return add_prefix_space_; }
  bool byte_level_regex() const { return byte_level_regex_ != nullptr; }
  // Same words for every input: the same split patterns (Digits and the equal Split regex count as
  // one) and the same ByteLevel options.
  bool equivalent(const PreTokenizer& other) const;

  // Appends the words of `text` to `words`, in order. Words are raw bytes (the byte-level mapping
  // happens in BPE) that view `text`, or `storage` where add_prefix_space or Metaspace made a new
  // string. at_start: text begins the input (Metaspace's prepend_scheme first).
  void split(std::string_view text, std::vector<std::string_view>& words, std::deque<std::string>& storage,
             bool at_start = true) const;

  // Describes the steps, e.g. "Split(/\p{N}/) -> ByteLevel(regex)" (for messages and tests).
  std::string describe() const;

 private:
  void split_metaspace(std::string_view w, bool first, std::vector<std::string_view>& words,
                       std::deque<std::string>& storage, std::vector<std::pair<size_t, size_t>>& ranges) const;

  std::vector<SplitStep> splits_;
  bool byte_level_ = false;
  bool add_prefix_space_ = false;
  std::unique_ptr<Regex> byte_level_regex_;
  std::optional<MetaspaceStep> metaspace_;
};

// The pre-tokenizer of a named family; throws temper::Error listing the known names otherwise.
// Also reports whether the family ignores merges for whole-vocabulary words (Llama-3).
PreTokenizer pre_tokenizer_by_name(const std::string& name, bool* ignore_merges = nullptr);
std::vector<std::string> pre_tokenizer_names();
// The llama.cpp name (tokenizer.ggml.pre) whose pre-tokenizer and ignore_merges equal these: gpt2,
// smollm, llama-bpe or qwen2 (the names llama.cpp's convert_hf_to_gguf.py writes); "" if none.
std::string pre_tokenizer_name_of(const PreTokenizer& pre, bool ignore_merges);

}  // namespace temper::text
