// Added-token matching (see added_tokens.h); follows tokenizers' AddedVocabulary::find_matches.
#include "temper/text/added_tokens.h"

#include "temper/core/error.h"
#include "temper/text/utf8.h"

namespace temper::text {

namespace {

// Start of the run of White_Space at the end of s (s.size() if none).
size_t whitespace_run_start_at_end(std::string_view s) {
  size_t start = s.size();
  size_t i = 0;
  // Walk forward (UTF-8 is not safely decodable backwards with invalid bytes); remember the run.
  while (i < s.size()) {
    const Utf8Char c = utf8_next(s, i);
    if (c.valid && is_unicode_whitespace(c.cp)) {
      if (start == s.size()) start = i;
    } else {
      start = s.size();
    }
    i += c.len;
  }
  return start;
}

size_t whitespace_run_len_at_start(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const Utf8Char c = utf8_next(s, i);
    if (!(c.valid && is_unicode_whitespace(c.cp))) break;
    i += c.len;
  }
  return i;
}

// Byte offset of the last character of s (s non-empty).
size_t last_char_start(std::string_view s) {
  size_t i = s.size() - 1;
  for (int k = 0; k < 3 && i > 0 && (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80; ++k) --i;
  return i;
}

}  // namespace

void AddedTokenMatcher::Trie::add(std::string_view s, int32_t token) {
  int32_t node = 0;
  for (unsigned char b : s) {
    const uint64_t key = (static_cast<uint64_t>(node) << 8) | b;
    auto it = edges.find(key);
    if (it == edges.end()) {
      const int32_t child = static_cast<int32_t>(terminal.size());
      terminal.push_back(-1);
      it = edges.emplace(key, child).first;
    }
    node = it->second;
  }
  if (terminal[node] < 0) terminal[node] = token;  // the first token with this content wins
  first_byte[static_cast<unsigned char>(s[0])] = true;
  any = true;
}

int32_t AddedTokenMatcher::Trie::longest_at(std::string_view s, size_t i, size_t* end) const {
  int32_t node = 0, best = -1;
  for (size_t j = i; j < s.size(); ++j) {
    auto it = edges.find((static_cast<uint64_t>(node) << 8) | static_cast<unsigned char>(s[j]));
    if (it == edges.end()) break;
    node = it->second;
    if (terminal[node] >= 0) best = terminal[node], *end = j + 1;
  }
  return best;
}

AddedTokenMatcher::AddedTokenMatcher(std::vector<AddedToken> tokens) : tokens_(std::move(tokens)) {
  bool single_word = false;
  for (size_t k = 0; k < tokens_.size(); ++k) {
    const AddedToken& t = tokens_[k];
    if (t.content.empty()) continue;
    (t.normalized ? normalized_ : raw_).add(t.content, static_cast<int32_t>(k));
    single_word = single_word || t.single_word;
  }
  // Rust regex's \w: Alphabetic, marks, decimal digits, connector punctuation, joiners.
  if (single_word) word_char_ = std::make_unique<Regex>(R"([\p{L}\p{Nl}\p{M}\p{Nd}\p{Pc}\x{200C}\x{200D}])", "\\w");
}

void AddedTokenMatcher::find(std::string_view s, const Trie& trie, bool parse_special,
                             std::vector<TextSegment>& out) const {
  if (!trie.any) {
    if (!s.empty()) out.push_back({s, -1});
    return;
  }
  size_t start_offset = 0;  // end of the previous match (tokenizers' start_offset)
  size_t i = 0;
  while (i < s.size()) {
    if (!trie.first_byte[static_cast<unsigned char>(s[i])]) {
      ++i;
      continue;
    }
    size_t end = 0;
    const int32_t k = trie.longest_at(s, i, &end);
    if (k < 0) {
      ++i;
      continue;
    }
    const AddedToken& t = tokens_[k];
    size_t start = i, stop = end;
    i = end;  // the search resumes after this match even if it is discarded (Aho-Corasick find_iter)
    if (!parse_special && t.special) continue;
    if (t.single_word) {
      const bool word_before = start > 0 && word_char_->matches_at(s, last_char_start(s.substr(0, start)));
      const bool word_after = stop < s.size() && word_char_->matches_at(s, stop);
      if (word_before || word_after) continue;
    }
    if (t.lstrip) start = std::max(whitespace_run_start_at_end(s.substr(0, start)), start_offset);
    if (t.rstrip) stop += whitespace_run_len_at_start(s.substr(stop));
    if (start_offset < start) out.push_back({s.substr(start_offset, start - start_offset), -1});
    out.push_back({s.substr(start, stop - start), t.id});
    start_offset = stop;
  }
  if (start_offset < s.size()) out.push_back({s.substr(start_offset), -1});
}

void AddedTokenMatcher::split(std::string_view text, bool parse_special, std::vector<TextSegment>& out) const {
  if (!normalized_.any) {
    find(text, raw_, parse_special, out);
    return;
  }
  std::vector<TextSegment> first;
  find(text, raw_, parse_special, first);
  for (const TextSegment& seg : first) {
    if (seg.id >= 0) {
      out.push_back(seg);
    } else {
      find(seg.text, normalized_, parse_special, out);
    }
  }
}

}  // namespace temper::text
