// The data a tokenizer is built from, as a GGUF file's tokenizer.ggml.* metadata carries it (the
// GGUF reader fills it; Tokenizer::from_spec builds from it): byte-level BPE (model "gpt2": merges)
// or SentencePiece BPE (model "llama": scores, byte tokens, add_space_prefix). Plain data plus one
// helper that splits GGUF's "a b" merge strings.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace temper::text {

// GGUF token types (llama.cpp's llama_token_type).
enum class TokenType : int32_t {
  kUndefined = 0,
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,      // special: matched in text, skipped by decode(skip_special)
  kUserDefined = 4,  // added, not special: matched in text
  kUnused = 5,
  kByte = 6,
};

// Added-token options that tokenizer.json has and GGUF has no key for (llama.cpp keeps them as
// llama_token_attr bits and sets them from the model's name): the same bit values.
enum class TokenAttr : int32_t {
  kNormalized = 1 << 6,
  kLstrip = 1 << 7,
  kRstrip = 1 << 8,
  kSingleWord = 1 << 9,
};

struct TokenizerSpec {
  // tokenizer.ggml.model: "gpt2" (byte-level BPE: merges) or "llama" (SentencePiece BPE: scores).
  std::string model = "gpt2";
  std::vector<std::string>
      tokens;  // id -> token text (byte-level alphabet, or "▁" for spaces; control/user tokens raw)
  std::vector<std::pair<std::string, std::string>> merges;  // "gpt2": in rank order ("a b" split at the space)
  std::vector<float>
      scores;  // "llama": tokenizer.ggml.scores, one per token (empty: all 0); a higher score merges first
  // "llama": tokenizer.ggml.add_space_prefix (llama.cpp's default where the key is absent: true): " " before
  // the text at the start and after each added token.
  bool add_space_prefix = true;
  std::vector<int32_t> token_types;                         // TokenType values; empty: only bos/eos/unk/pad are special
  // Empty, or one per token: TokenAttr bits or'ed, applied to the added (control, unknown,
  // user-defined) tokens. Not a GGUF key: a spec read from GGUF has none, and Tokenizer::to_spec
  // fills it only when some added token has an option set (e.g. lstrip on <mask>).
  std::vector<int32_t> token_attrs;
  std::string pre;  // tokenizer.ggml.pre: gpt2, smollm, llama3 (llama-bpe), qwen2, ... see pre_tokenizer.h
  int32_t bos_id = -1, eos_id = -1, unk_id = -1, pad_id = -1;
  // tokenizer.ggml.add_bos_token / add_eos_token. Where the key is absent llama.cpp defaults
  // add_bos to true for the Llama-3 family (pre llama3, llama-v3, llama-bpe): the reader decides.
  bool add_bos = false, add_eos = false;
  std::string chat_template;

  // Adds "a b" merge strings (GGUF's tokenizer.ggml.merges form), split at the first space after
  // the first byte as llama.cpp does.
  void add_merge_strings(const std::vector<std::string>& merge_strings);
};

}  // namespace temper::text
