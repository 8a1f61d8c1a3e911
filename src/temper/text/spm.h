// llama.cpp's SentencePiece BPE tokenizer (GGUF tokenizer.ggml.model = "llama", llm_tokenizer_spm):
// the text (already with its "▁" prefix and spaces as "▁") starts as one symbol per UTF-8
// character; the adjacent pair whose concatenation is a vocabulary token with the highest score
// (tokenizer.ggml.scores) is merged, leftmost first on equal scores, until no pair is a token. A
// final symbol that is no token (a character outside the vocabulary) becomes its bytes' <0xAB>
// tokens (else the byte as a one-character token, else unk). A priority queue over the pairs
// keeps a long word O(n log n). Leaves out: SentencePiece's Unigram model (GGUF has no such type).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace temper::text {

class SpmModel {
 public:
  // token_ids: every token's text -> id (all types, as llama.cpp's token_to_id); scores by id.
  SpmModel(const std::unordered_map<std::string, int32_t>& token_ids, std::vector<float> scores, int32_t unk_id);
  SpmModel(const SpmModel&) = delete;
  SpmModel& operator=(const SpmModel&) = delete;

  // Appends the ids of text (escaped: spaces already "▁").
  void encode(std::string_view text, std::vector<int32_t>& out) const;

  const std::vector<float>& scores() const { return scores_; }

 private:
  const std::unordered_map<std::string, int32_t>& token_ids_;
  std::vector<float> scores_;
  std::array<int32_t, 256> byte_id_{};  // the token of each byte (<0xAB>, else the byte itself, else unk)
};

}  // namespace temper::text
