// The BPE model of tokenizers (models/bpe): a word starts as one symbol per character and the
// adjacent pair with the lowest merge rank is merged, leftmost first, until no pair has a rank
// (word.rs merge_all). Byte-level tokenizers: a word is raw bytes and each byte's character is its
// byte-level symbol. SentencePiece-style (byte_level false): a word is UTF-8 text and each Unicode
// character is a symbol as written ("▁" included). Per-word results are
// cached. Options as in tokenizers: ignore_merges (a word that is itself in the vocabulary is one
// token; Llama-3), unk token with fusing, byte_fallback (<0xAB> tokens for symbols missing from
// the vocabulary). Leaves out: dropout, continuing_subword_prefix, end_of_word_suffix.
#pragma once

#include <array>
#include <cstdint>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace temper::text {

struct BpeOptions {
  int32_t unk_id = -1;
  bool fuse_unk = false;
  bool byte_fallback = false;
  bool ignore_merges = false;
  bool byte_level = true;  // symbols are the byte-level characters of the bytes; else the UTF-8 characters
};

class BpeModel {
 public:
  // vocab: token string (byte-level alphabet) -> id. merges in rank order; each pair must name two
  // vocabulary tokens whose concatenation is a vocabulary token. `what` prefixes error messages
  // (e.g. "tokenizer.json: model.merges"). A later duplicate of a pair overrides the earlier one
  // (as tokenizers' HashMap collect does).
  BpeModel(const std::unordered_map<std::string, int32_t>& vocab,
           const std::vector<std::pair<std::string, std::string>>& merges, const BpeOptions& opt,
           const std::string& what);
  BpeModel(const BpeModel&) = delete;
  BpeModel& operator=(const BpeModel&) = delete;

  // Appends the ids of one word (raw bytes) to out.
  void encode_word(std::string_view word, std::vector<int32_t>& out) const;

  size_t num_merges() const { return merges_.size(); }

 private:
  void merge_word(std::string_view word, std::vector<int32_t>& out) const;
  // Appends the id of a symbol's character ch (vocabulary form), or its <0xAB> tokens, or the unk
  // (pending_unk: one is waiting to be fused), as tokenizers' BPE::merge_word.
  void push_char(std::string_view ch, int32_t id, std::vector<int32_t>& ids, bool& pending_unk) const;

  const std::unordered_map<std::string, int32_t>& vocab_;
  std::unordered_map<uint64_t, std::pair<int32_t, int32_t>> merges_;  // (left<<32|right) -> (rank, new id)
  std::array<int32_t, 256> byte_id_{};      // id of each byte's byte-level character, -1 if absent
  std::array<int32_t, 256> fallback_id_{};  // id of "<0xAB>" (byte_fallback), -1 if absent
  BpeOptions opt_;

  static constexpr size_t kCacheCapacity = 10000;  // as tokenizers
  static constexpr size_t kCacheMaxWord = 256;     // bytes
  mutable std::shared_mutex cache_mu_;
  mutable std::unordered_map<std::string, std::vector<int32_t>> cache_;
};

}  // namespace temper::text
