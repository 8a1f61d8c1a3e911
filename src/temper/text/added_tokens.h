// Added tokens (special and user-defined) found in raw text before pre-tokenization, as tokenizers'
// AddedVocabulary does: leftmost-longest matching (its Aho-Corasick LeftmostLongest), first the
// tokens with normalized=false in the raw text, then the normalized ones in the normalized text
// between those (find_raw, find_normalized); single_word, lstrip and rstrip as there. With
// parse_special=false special tokens are not matched (tokenizers' encode_special_tokens).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "temper/text/regex.h"

namespace temper::text {

struct AddedToken {
  int32_t id = -1;
  std::string content;
  bool special = false;
  bool single_word = false;
  bool lstrip = false;
  bool rstrip = false;
  bool normalized = false;
};

// A piece of the input: plain text (id < 0) or an added token.
struct TextSegment {
  std::string_view text;
  int32_t id = -1;
};

class AddedTokenMatcher {
 public:
  explicit AddedTokenMatcher(std::vector<AddedToken> tokens);
  AddedTokenMatcher(const AddedTokenMatcher&) = delete;
  AddedTokenMatcher& operator=(const AddedTokenMatcher&) = delete;

  // Splits text into segments covering it (added-token segments include stripped whitespace).
  void split(std::string_view text, bool parse_special, std::vector<TextSegment>& out) const;
  // The two halves of split: the tokens with normalized=false in the raw text, the ones with
  // normalized=true in the normalized text between those (tokenizers' extract_and_normalize).
  void find_raw(std::string_view text, bool parse_special, std::vector<TextSegment>& out) const {
    find(text, raw_, parse_special, out);
  }
  void find_normalized(std::string_view text, bool parse_special, std::vector<TextSegment>& out) const {
    find(text, normalized_, parse_special, out);
  }

  const std::vector<AddedToken>& tokens() const { return tokens_; }
  bool empty() const { return tokens_.empty(); }

 private:
  struct Trie {
    std::unordered_map<uint64_t, int32_t> edges;  // (node << 8 | byte) -> child
    std::vector<int32_t> terminal;                // node -> token index or -1
    bool first_byte[256] = {};
    bool any = false;
    Trie() : terminal(1, -1) {}
    void add(std::string_view s, int32_t token);
    // Longest token starting at i: its index and end, or -1.
    int32_t longest_at(std::string_view s, size_t i, size_t* end) const;
  };
  void find(std::string_view s, const Trie& trie, bool parse_special, std::vector<TextSegment>& out) const;

  std::vector<AddedToken> tokens_;
  Trie raw_, normalized_;
  std::unique_ptr<Regex> word_char_;  // Rust regex \w (single_word)
};

}  // namespace temper::text
