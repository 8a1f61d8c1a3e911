// Pre-tokenizer steps and the named families (see pre_tokenizer.h). The regexes are those of the
// models' Hugging Face tokenizer.json files (llama.cpp's llama-vocab.cpp quotes the same strings
// as "original regex from tokenizer.json"); SmolLM/StarCoder split every digit first
// (tokenizers' Digits(individual_digits=true) == an isolated \p{N} split).
#include "temper/text/pre_tokenizer.h"

#include <algorithm>
#include <utility>

#include "temper/core/error.h"
#include "temper/text/normalizer.h"

namespace temper::text {

namespace {

// Isolated split: every match and every non-empty gap between matches is a word.
void split_isolated(const Regex& re, std::string_view s, std::vector<std::string_view>& out,
                    std::vector<std::pair<size_t, size_t>>& ranges) {
  ranges.clear();
  re.find_all(s, ranges);
  size_t prev = 0;
  for (auto [b, e] : ranges) {
    if (b > prev) out.push_back(s.substr(prev, b - prev));
    out.push_back(s.substr(b, e - b));
    prev = e;
  }
  if (prev < s.size()) out.push_back(s.substr(prev));
}

struct Piece {
  size_t begin, end;
  bool match;
};

// The matches and the non-empty gaps between them, in order (tokenizers' find_matches).
std::vector<Piece> match_pieces(const std::vector<std::pair<size_t, size_t>>& ranges, size_t size) {
  std::vector<Piece> pieces;
  size_t prev = 0;
  for (auto [b, e] : ranges) {
    if (b > prev) pieces.push_back({prev, b, false});
    pieces.push_back({b, e, true});
    prev = e;
  }
  if (prev < size) pieces.push_back({prev, size, false});
  return pieces;
}

// MergedWithPrevious / MergedWithNext as tokenizers' NormalizedString::split: a match joins the gap
// before (after) it; a match next to another match, or with nothing on that side, is a word of its own.
void split_merged(const std::vector<std::pair<size_t, size_t>>& ranges, std::string_view s, bool with_next,
                  std::vector<std::string_view>& out) {
  std::vector<Piece> pieces = match_pieces(ranges, s.size());
  std::vector<Piece> acc;
  bool previous_match = false;
  if (with_next) std::reverse(pieces.begin(), pieces.end());
  for (const Piece& p : pieces) {
    if (p.match && !previous_match && !acc.empty()) {
      (with_next ? acc.back().begin : acc.back().end) = with_next ? p.begin : p.end;
    } else {
      acc.push_back(p);
    }
    previous_match = p.match;
  }
  if (with_next) std::reverse(acc.begin(), acc.end());
  for (const Piece& p : acc) out.push_back(s.substr(p.begin, p.end - p.begin));
}

void split_step(const SplitStep& step, std::string_view s, std::vector<std::string_view>& out,
                std::vector<std::pair<size_t, size_t>>& ranges) {
  if (step.behavior == SplitBehavior::kIsolated) return split_isolated(step.regex, s, out, ranges);
  ranges.clear();
  step.regex.find_all(s, ranges);
  split_merged(ranges, s, step.behavior == SplitBehavior::kMergedWithNext, out);
}

// Literal occurrences of pattern in s (non-overlapping, left to right).
void find_literal(std::string_view s, std::string_view pattern, std::vector<std::pair<size_t, size_t>>& ranges) {
  ranges.clear();
  for (size_t i = s.find(pattern); i != std::string_view::npos; i = s.find(pattern, i + pattern.size())) {
    ranges.emplace_back(i, i + pattern.size());
  }
}

struct Family {
  const char* name;
  const char* kind;  // gpt2 | smollm | llama3 | qwen2
};

// llama.cpp's names (tokenizer.ggml.pre) for the four patterns we implement.
constexpr Family kFamilies[] = {
    {"gpt2", "gpt2"},       {"gpt-2", "gpt2"},
    {"smollm", "smollm"},   {"starcoder", "smollm"},
    {"refact", "smollm"},   {"llama3", "llama3"},
    {"llama-v3", "llama3"}, {"llama-bpe", "llama3"},
    {"qwen2", "qwen2"},     {"deepseek-r1-qwen", "qwen2"},
};

}  // namespace

void PreTokenizer::add_split(Regex regex, SplitBehavior behavior) {
  TEMPER_CHECK(!byte_level_) << "pre-tokenizer: a split after ByteLevel is not supported (ByteLevel must be last)";
  TEMPER_CHECK(!metaspace_) << "pre-tokenizer: a split after Metaspace is not supported (Metaspace must be last)";
  const SplitKind kind = regex.literal() ? SplitKind::kString : SplitKind::kRegex;
  splits_.push_back(SplitStep{std::move(regex), kind, behavior});
}

void PreTokenizer::set_metaspace(MetaspaceStep step) {
  TEMPER_CHECK(!byte_level_ && !metaspace_) << "pre-tokenizer: Metaspace after ByteLevel or Metaspace";
  TEMPER_CHECK(!step.replacement.empty()) << "pre-tokenizer: Metaspace with an empty replacement";
  metaspace_ = std::move(step);
}

void PreTokenizer::add_digits(bool individual) {
  add_split(Regex(individual ? R"(\p{N})" : R"(\p{N}+)", "Digits"));
  splits_.back().kind = individual ? SplitKind::kDigitsIndividual : SplitKind::kDigitsContiguous;
}

bool PreTokenizer::equivalent(const PreTokenizer& other) const {
  if (byte_level_ != other.byte_level_ || add_prefix_space_ != other.add_prefix_space_ ||
      byte_level_regex() != other.byte_level_regex() || splits_.size() != other.splits_.size() ||
      metaspace_.has_value() != other.metaspace_.has_value()) {
    return false;
  }
  if (metaspace_ && (metaspace_->replacement != other.metaspace_->replacement ||
                     metaspace_->scheme != other.metaspace_->scheme || metaspace_->split != other.metaspace_->split)) {
    return false;
  }
  for (size_t i = 0; i < splits_.size(); ++i) {
    const Regex& a = splits_[i].regex;
    const Regex& b = other.splits_[i].regex;
    if (a.pattern() != b.pattern() || a.literal() != b.literal()) return false;
    if (splits_[i].behavior != other.splits_[i].behavior) return false;
  }
  return true;
}

void PreTokenizer::set_byte_level(bool add_prefix_space, bool use_regex) {
  TEMPER_CHECK(!byte_level_) << "pre-tokenizer: ByteLevel appears twice";
  byte_level_ = true;
  add_prefix_space_ = add_prefix_space;
  if (use_regex) byte_level_regex_ = std::make_unique<Regex>(kRegexGpt2, "ByteLevel regex");
}

void PreTokenizer::split(std::string_view text, std::vector<std::string_view>& words, std::deque<std::string>& storage,
                         bool at_start) const {
  std::vector<std::string_view> cur{text}, next;
  std::vector<std::pair<size_t, size_t>> ranges;
  for (const SplitStep& step : splits_) {
    next.clear();
    for (std::string_view w : cur) split_step(step, w, next, ranges);
    cur.swap(next);
  }
  if (metaspace_) {
    for (std::string_view w : cur) split_metaspace(w, at_start && w.data() == text.data(), words, storage, ranges);
    return;
  }
  for (std::string_view w : cur) {
    if (w.empty()) continue;
    if (add_prefix_space_ && w.front() != ' ') {
      storage.push_back(" " + std::string(w));
      w = storage.back();
    }
    if (byte_level_regex_) {
      split_isolated(*byte_level_regex_, w, words, ranges);
    } else {
      words.push_back(w);
    }
  }
}

// Metaspace on one word: ' ' -> replacement, the prefix by the scheme, then (split) a new word
// before each replacement. first: the word starts the input.
void PreTokenizer::split_metaspace(std::string_view w, bool first, std::vector<std::string_view>& words,
                                   std::deque<std::string>& storage,
                                   std::vector<std::pair<size_t, size_t>>& ranges) const {
  const MetaspaceStep& m = *metaspace_;
  std::string s = replace_all(w, " ", m.replacement);
  const bool starts = s.compare(0, m.replacement.size(), m.replacement) == 0;
  if (!starts && (m.scheme == PrependScheme::kAlways || (m.scheme == PrependScheme::kFirst && first))) {
    s.insert(0, m.replacement);
  }
  if (s.empty()) return;
  std::string_view sv = storage.emplace_back(std::move(s));
  if (!m.split) {
    words.push_back(sv);
    return;
  }
  find_literal(sv, m.replacement, ranges);
  split_merged(ranges, sv, /*with_next=*/true, words);
}

std::string PreTokenizer::describe() const {
  static const char* kBehavior[] = {"", ", merged with previous", ", merged with next"};
  std::string d;
  for (const SplitStep& step : splits_) {
    d += "Split(/" + step.regex.pattern() + "/" + kBehavior[static_cast<int>(step.behavior)] + ") -> ";
  }
  if (metaspace_) {
    static const char* kScheme[] = {"always", "first", "never"};
    return d + "Metaspace(" + metaspace_->replacement + ", prepend " + kScheme[static_cast<int>(metaspace_->scheme)] +
           (metaspace_->split ? ", split)" : ", no split)");
  }
  if (!byte_level_ && !splits_.empty()) return d.substr(0, d.size() - 4);
  d += byte_level_ ? std::string("ByteLevel(") + (add_prefix_space_ ? "prefix space, " : "") +
                         (byte_level_regex_ ? "gpt2 regex)" : "no regex)")
                   : std::string("(none)");
  return d;
}

std::vector<std::string> pre_tokenizer_names() {
  std::vector<std::string> v;
  for (const Family& f : kFamilies) v.emplace_back(f.name);
  return v;
}

PreTokenizer pre_tokenizer_by_name(const std::string& name, bool* ignore_merges) {
  std::string kind;
  for (const Family& f : kFamilies) {
    if (name == f.name) kind = f.kind;
  }
  if (kind.empty()) {
    std::string known;
    for (const std::string& n : pre_tokenizer_names()) known += (known.empty() ? "" : ", ") + n;
    TEMPER_FAIL() << "unknown pre-tokenizer '" << name << "' (GGUF tokenizer.ggml.pre); known: " << known;
  }
  PreTokenizer p;
  const std::string what = "pre-tokenizer '" + name + "'";
  if (kind == "gpt2") {
    p.set_byte_level(false, true);
  } else if (kind == "smollm") {
    p.add_digits(true);
    p.set_byte_level(false, true);
  } else if (kind == "llama3") {
    p.add_split(Regex(kRegexLlama3, what));
    p.set_byte_level(false, false);
  } else {
    p.add_split(Regex(kRegexQwen2, what));
    p.set_byte_level(false, false);
  }
  if (ignore_merges) *ignore_merges = kind == "llama3";
  return p;
}

std::string pre_tokenizer_name_of(const PreTokenizer& pre, bool ignore_merges) {
  for (const char* name : {"gpt2", "smollm", "llama-bpe", "qwen2"}) {
    bool im = false;
    const PreTokenizer known = pre_tokenizer_by_name(name, &im);
    if (im == ignore_merges && known.equivalent(pre)) return name;
  }
  return {};
}

}  // namespace temper::text
