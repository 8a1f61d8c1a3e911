// BPE tokenizers as Hugging Face tokenizers runs them: byte-level (ByteLevel pre-tokenizer and
// decoder; the GPT-2, Llama-3, Qwen2 and SmolLM regexes) and SentencePiece-style (Unicode
// characters with byte fallback, "▁" for spaces: Prepend/Replace normalizers or Metaspace, the
// Replace/ByteFallback/Fuse/Strip/Metaspace decoder chain), added/special tokens; GGUF model
// "llama" with llama.cpp's score-ordered SPM merging. Built from a TokenizerSpec (GGUF metadata) or
// a Hugging Face tokenizer.json, and written back to either. Leaves out: Unigram/WordPiece models,
// other normalizers (see docs/TOKENIZER.md), offsets, truncation/padding, BPE dropout.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "temper/text/tokenizer_spec.h"

namespace temper::text {

namespace detail {
struct TokenizerImpl;
}

// Built from a TokenizerSpec (GGUF metadata) or a Hugging Face tokenizer.json (+ tokenizer_config.json), and
// written back to either (tokenizer_export.cpp), so `temper convert` carries it across formats.
// Thread-safe: encode/decode may be called concurrently; copies share the same immutable data.
class Tokenizer {
 public:
  static Tokenizer from_spec(const TokenizerSpec& spec);
  // tokenizer_config_json may be empty (then bos/eos come from the post-processor, if any).
  static Tokenizer from_hf_files(const std::string& tokenizer_json, const std::string& tokenizer_config_json = "");
  // The same from JSON text already in memory; `name` stands for the file in error messages.
  static Tokenizer from_hf_json(std::string_view tokenizer_json, std::string_view config_json = "",
                                const std::string& name = "tokenizer.json",
                                const std::string& config_name = "tokenizer_config.json");

  // The GGUF form: tokens in id order (byte-level alphabet; added tokens as written; an id no token
  // has becomes "[PAD<id>]" of type unused), merges in rank order, token types (control: special
  // added tokens, user-defined: other added tokens, normal otherwise), pre = llama.cpp's name of the
  // pre-tokenizer (gpt2, smollm, llama-bpe, qwen2), bos/eos/unk/pad, add_bos/add_eos, chat template,
  // token_attrs where an added token has lstrip/rstrip/single_word/normalized.
  // SentencePiece-style: model "llama" with scores (as read from GGUF, or derived from the merge
  // ranks), byte tokens of type BYTE, add_space_prefix; a GGUF "gemma4" tokenizer as read.
  // from_spec(to_spec()) encodes as this tokenizer does. Throws temper::Error where the spec cannot
  // say what this tokenizer does: a pre-tokenizer (with its ignore_merges) llama.cpp has no name
  // for, byte_fallback, other special tokens added around the text than [bos] and [eos], an unk
  // token BPE uses that differs from unk_id; SentencePiece-style, a pipeline (Metaspace) or merges
  // llama.cpp's score order would tokenize differently (see docs/TOKENIZER.md).
  TokenizerSpec to_spec() const;
  // Hugging Face tokenizer.json (as tokenizers 0.21 writes it: model BPE with vocab and merges as
  // [a, b] pairs, added_tokens, normalizer, pre_tokenizer, post_processor, decoder) and the
  // matching tokenizer_config.json (bos/eos/unk/pad tokens, add_bos_token/add_eos_token,
  // chat_template, tokenizer_class PreTrainedTokenizerFast). from_hf_json of the two encodes as this
  // tokenizer does. Throws temper::Error if a token is not valid UTF-8 (JSON cannot carry it).
  std::string to_hf_json() const;
  std::string to_hf_config_json() const;

  // add_special: the BOS/EOS (HF: the post-processor's special tokens) around the text.
  // parse_special=false: special tokens written in the text are tokenized as plain text
  // (HF's split_special_tokens); user-defined added tokens still match.
  std::vector<int32_t> encode(std::string_view text, bool add_special = false, bool parse_special = true) const;
  // Ids outside [0, vocab_size) decode to nothing (as HF). Invalid UTF-8 becomes U+FFFD.
  std::string decode(std::span<const int32_t> ids, bool skip_special = false) const;

  // The raw bytes a token stands for (may be part of a UTF-8 character); empty for an unknown id.
  std::string_view token_bytes(int32_t id) const;
  // Vocabulary strings (byte-level alphabet, added tokens as written), as HF's token_to_id.
  int32_t token_to_id(std::string_view token) const;  // -1 if absent
  const std::string& id_to_token(int32_t id) const;   // throws temper::Error if out of range
  bool is_special(int32_t id) const;
  int32_t vocab_size() const;

  int32_t bos_id() const;
  int32_t eos_id() const;
  int32_t unk_id() const;
  int32_t pad_id() const;
  // Ids encode(add_special=true) puts before / after the text.
  const std::vector<int32_t>& prefix_ids() const;
  const std::vector<int32_t>& suffix_ids() const;
  const std::string& chat_template() const;
  // e.g. "Split(/.../) -> ByteLevel(no regex)", for diagnostics.
  std::string describe() const;

 private:
  explicit Tokenizer(std::shared_ptr<const detail::TokenizerImpl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<const detail::TokenizerImpl> impl_;
  friend struct detail::TokenizerImpl;
};

}  // namespace temper::text
