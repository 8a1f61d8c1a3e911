// Internal: the immutable data behind a Tokenizer, shared by the builders (tokenizer.cpp from a
// TokenizerSpec, tokenizer_hf.cpp from tokenizer.json). Not part of the public API.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "temper/text/added_tokens.h"
#include "temper/text/bpe.h"
#include "temper/text/decoder.h"
#include "temper/text/normalizer.h"
#include "temper/text/pre_tokenizer.h"
#include "temper/text/spm.h"
#include "temper/text/tokenizer.h"

namespace temper::text::detail {

struct TokenizerImpl {
  std::string source;                                  // file or "TokenizerSpec", for messages
  std::unordered_map<std::string, int32_t> vocab;      // the BPE model's vocabulary
  std::unordered_map<std::string, int32_t> token_ids;  // added tokens first, then vocab (token_to_id)
  std::vector<std::string> id_to_token;                // "" where no token has the id
  std::vector<uint8_t> has_id;
  std::vector<uint8_t> special;
  std::vector<std::string> token_bytes;  // what each id decodes to
  std::vector<AddedToken> added;
  PreTokenizer pre;
  BpeOptions bpe_options;
  std::vector<std::pair<std::string, std::string>> merges;  // as given, in rank order (for export)
  std::unique_ptr<BpeModel> bpe;                            // null for an SPM model
  std::unique_ptr<AddedTokenMatcher> matcher;
  bool decode_byte_fallback = false;  // decoder has ByteFallback: "<0xAB>" tokens decode to the byte
  bool byte_level = true;             // byte-level BPE; else SentencePiece-style (Unicode characters, "▁")
  Normalizer normalizer;              // applied to the text between added tokens
  Decoder decoder;                    // SentencePiece-style: the chain decode runs (byte-level decodes bytes)
  // GGUF tokenizer.ggml.model "llama": llama.cpp's score-ordered SPM merges instead of BPE ranks.
  std::string gguf_model;  // tokenizer.ggml.model of a SentencePiece-style spec ("llama", "gemma4"), else ""
  bool use_spm = false;
  std::vector<float> scores;  // "llama": tokenizer.ggml.scores, one per id
  std::unique_ptr<SpmModel> spm;
  bool add_space_prefix = false;     // "llama": tokenizer.ggml.add_space_prefix (the normalizer has the Prepend)
  std::vector<int32_t> token_types;  // "llama": as read (BYTE, UNUSED kept for export); else empty
  int32_t bos = -1, eos = -1, unk = -1, pad = -1;
  std::vector<int32_t> prefix, suffix;
  std::string chat_template;

  // After vocab, id_to_token/has_id (vocab_size entries), added, pre, bpe_options (and spm) are set: keeps
  // the merges and builds the BPE model (unless spm), the matcher, special flags, token_to_id and token_bytes.
  void finish(std::vector<std::pair<std::string, std::string>> merges, const std::string& merges_what);
  void check_id(int32_t id, const std::string& what) const;

  static Tokenizer wrap(std::shared_ptr<const TokenizerImpl> impl) { return Tokenizer(std::move(impl)); }
};

}  // namespace temper::text::detail
