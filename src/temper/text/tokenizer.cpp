// Tokenizer: encode/decode over the shared TokenizerImpl, and the build from a TokenizerSpec (GGUF
// metadata, following llama.cpp's reading of it: control and user-defined tokens are the added
// tokens, pre names as in pre_tokenizer.h, ignore_merges for the Llama-3 family).
#include "temper/text/tokenizer.h"

#include <cstdio>
#include <deque>

#include "temper/core/error.h"
#include "temper/text/byte_level.h"
#include "temper/text/tokenizer_impl.h"
#include "temper/text/utf8.h"

namespace temper::text {

namespace detail {

void TokenizerImpl::finish(std::vector<std::pair<std::string, std::string>> merge_list,
                           const std::string& merges_what) {
  merges = std::move(merge_list);
  const size_t n = id_to_token.size();
  special.assign(n, 0);
  for (const AddedToken& t : added) {
    if (t.special) special[t.id] = 1;
  }
  if (!use_spm) bpe = std::make_unique<BpeModel>(vocab, merges, bpe_options, merges_what);
  matcher = std::make_unique<AddedTokenMatcher>(added);
  token_ids = vocab;
  for (const AddedToken& t : added) token_ids[t.content] = t.id;
  if (use_spm) spm = std::make_unique<SpmModel>(token_ids, scores, unk);
  token_bytes.assign(n, std::string());
  for (size_t id = 0; id < n; ++id) {
    if (!has_id[id]) continue;
    const std::string& tok = id_to_token[id];
    if (!byte_level) {
      token_bytes[id] = decoder.token_bytes(tok);
      continue;
    }
    unsigned b = 0;
    char tail = 0;
    if (decode_byte_fallback && tok.size() == 6 && std::sscanf(tok.c_str(), "<0x%2X%c", &b, &tail) == 2 &&
        tail == '>') {
      token_bytes[id] = std::string(1, static_cast<char>(b));
    } else {
      token_bytes[id] = byte_level_decode_token(tok);
    }
  }
}

void TokenizerImpl::check_id(int32_t id, const std::string& what) const {
  TEMPER_CHECK(id >= -1 && id < static_cast<int32_t>(id_to_token.size()))
      << source << ": " << what << " " << id << " is out of range (vocabulary of " << id_to_token.size() << ")";
  TEMPER_CHECK(id < 0 || has_id[id]) << source << ": " << what << " " << id << " names no token";
}

}  // namespace detail

namespace {

// The words of one piece of text between added tokens: normalized, then split on the normalized
// added tokens (tokenizers' AddedVocabulary::extract_and_normalize), then pre-tokenized and encoded.
void encode_text(const detail::TokenizerImpl& t, std::string_view text, bool at_start, bool parse_special,
                 std::vector<int32_t>& out) {
  std::deque<std::string> storage;
  std::string_view normalized = text;
  if (!t.normalizer.empty()) normalized = storage.emplace_back(t.normalizer.apply(text));
  std::vector<TextSegment> pieces;
  t.matcher->find_normalized(normalized, parse_special, pieces);
  std::vector<std::string_view> words;
  for (const TextSegment& p : pieces) {
    if (p.id >= 0) {
      out.push_back(p.id);
      continue;
    }
    words.clear();
    t.pre.split(p.text, words, storage, at_start && p.text.data() == normalized.data());
    for (std::string_view w : words) {
      if (t.spm) {
        t.spm->encode(w, out);
      } else {
        t.bpe->encode_word(w, out);
      }
    }
  }
}

}  // namespace

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special, bool parse_special) const {
  const detail::TokenizerImpl& t = *impl_;
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 4);
  if (add_special) out.insert(out.end(), t.prefix.begin(), t.prefix.end());
  std::vector<TextSegment> segments;
  t.matcher->find_raw(text, parse_special, segments);
  for (const TextSegment& seg : segments) {
    if (seg.id >= 0) {
      out.push_back(seg.id);
    } else {
      encode_text(t, seg.text, seg.text.data() == text.data(), parse_special, out);
    }
  }
  if (add_special) out.insert(out.end(), t.suffix.begin(), t.suffix.end());
  return out;
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_special) const {
  const detail::TokenizerImpl& t = *impl_;
  if (!t.byte_level) {
    std::vector<std::string> tokens;
    tokens.reserve(ids.size());
    for (int32_t id : ids) {
      if (id < 0 || id >= vocab_size() || !t.has_id[id]) continue;
      if (skip_special && t.special[id]) continue;
      tokens.push_back(t.id_to_token[id]);
    }
    return t.decoder.decode(std::move(tokens));
  }
  std::string bytes;
  for (int32_t id : ids) {
    if (id < 0 || id >= vocab_size()) continue;
    if (skip_special && t.special[id]) continue;
    bytes += t.token_bytes[id];
  }
  return utf8_lossy(bytes);
}

std::string_view Tokenizer::token_bytes(int32_t id) const {
  if (id < 0 || id >= vocab_size()) return {};
  return impl_->token_bytes[id];
}

int32_t Tokenizer::token_to_id(std::string_view token) const {
  auto it = impl_->token_ids.find(std::string(token));
  return it == impl_->token_ids.end() ? -1 : it->second;
}

const std::string& Tokenizer::id_to_token(int32_t id) const {
  TEMPER_CHECK(id >= 0 && id < vocab_size())
      << "token id " << id << " is out of range (vocabulary of " << vocab_size() << ")";
  return impl_->id_to_token[id];
}

bool Tokenizer::is_special(int32_t id) const {
  return id >= 0 && id < vocab_size() && impl_->special[id];
}
int32_t Tokenizer::vocab_size() const {
  return static_cast<int32_t>(impl_->id_to_token.size());
}
int32_t Tokenizer::bos_id() const {
  return impl_->bos;
}
int32_t Tokenizer::eos_id() const {
  return impl_->eos;
}
int32_t Tokenizer::unk_id() const {
  return impl_->unk;
}
int32_t Tokenizer::pad_id() const {
  return impl_->pad;
}
const std::vector<int32_t>& Tokenizer::prefix_ids() const {
  return impl_->prefix;
}
const std::vector<int32_t>& Tokenizer::suffix_ids() const {
  return impl_->suffix;
}
const std::string& Tokenizer::chat_template() const {
  return impl_->chat_template;
}
std::string Tokenizer::describe() const {
  return impl_->pre.describe();
}

void TokenizerSpec::add_merge_strings(const std::vector<std::string>& merge_strings) {
  merges.reserve(merges.size() + merge_strings.size());
  for (size_t i = 0; i < merge_strings.size(); ++i) {
    const std::string& m = merge_strings[i];
    const size_t sp = m.size() > 1 ? m.find(' ', 1) : std::string::npos;
    TEMPER_CHECK(sp != std::string::npos)
        << "tokenizer.ggml.merges[" << i << "] = '" << m << "': expected two tokens separated by a space";
    merges.emplace_back(m.substr(0, sp), m.substr(sp + 1));
  }
}

namespace {

// GGUF model "llama" as llama.cpp runs it: the text between added tokens gets " " (add_space_prefix)
// and its spaces become "▁", then score-ordered SPM merges, byte tokens for the rest. Model
// "gemma4" (Gemma 4): the same text, then BPE by merge rank over Unicode characters with byte
// fallback (tokenizers' BPE, as Gemma's tokenizer.json). Decoded as transformers' GGUF converter
// writes it: ByteFallback, Fuse, "▁" -> " ", one leading space stripped (with add_space_prefix).
void set_spm_pipeline(const TokenizerSpec& spec, detail::TokenizerImpl& t) {
  TEMPER_CHECK(spec.scores.empty() || spec.scores.size() == spec.tokens.size())
      << "TokenizerSpec: " << spec.scores.size() << " scores (tokenizer.ggml.scores) for " << spec.tokens.size()
      << " tokens";
  const bool by_merges = spec.model == "gemma4";
  TEMPER_CHECK(by_merges || spec.merges.empty())
      << "TokenizerSpec: model 'llama' merges by tokenizer.ggml.scores; it has " << spec.merges.size()
      << " merges (tokenizer.ggml.merges) temper would ignore";
  TEMPER_CHECK(!by_merges || !spec.merges.empty())
      << "TokenizerSpec: model '" << spec.model << "' merges by tokenizer.ggml.merges; it has none";
  const std::string space = "\xE2\x96\x81";
  t.gguf_model = spec.model;
  t.use_spm = !by_merges;
  t.byte_level = false;
  t.scores = spec.scores.empty() ? std::vector<float>(spec.tokens.size(), 0.0f) : spec.scores;
  t.add_space_prefix = spec.add_space_prefix;
  t.token_types = spec.token_types;
  if (spec.add_space_prefix) t.normalizer.add_prepend(space);
  t.normalizer.add_replace(" ", space);
  t.decoder.add(decoder_step(DecoderKind::kByteFallback));
  t.decoder.add(decoder_step(DecoderKind::kFuse));
  t.decoder.add(decoder_step(DecoderKind::kReplace, space, " "));
  if (spec.add_space_prefix) {
    DecoderStep strip = decoder_step(DecoderKind::kStrip, "", " ");
    strip.start = 1;
    t.decoder.add(std::move(strip));
  }
  t.decode_byte_fallback = true;
  t.bpe_options.byte_level = false;
  t.bpe_options.byte_fallback = true;
}

}  // namespace

Tokenizer Tokenizer::from_spec(const TokenizerSpec& spec) {
  auto impl = std::make_shared<detail::TokenizerImpl>();
  detail::TokenizerImpl& t = *impl;
  t.source = "TokenizerSpec";
  TEMPER_CHECK(spec.model == "gpt2" || spec.model == "llama" || spec.model == "gemma4")
      << "TokenizerSpec: tokenizer model '" << spec.model
      << "' (tokenizer.ggml.model) is not supported; supported: 'gpt2' (byte-level BPE), 'llama' (SentencePiece "
         "BPE by scores), 'gemma4' (SentencePiece-style BPE by merges)";
  TEMPER_CHECK(!spec.tokens.empty()) << "TokenizerSpec: no tokens (tokenizer.ggml.tokens is empty)";
  TEMPER_CHECK(spec.token_types.empty() || spec.token_types.size() == spec.tokens.size())
      << "TokenizerSpec: " << spec.token_types.size() << " token types (tokenizer.ggml.token_type) for "
      << spec.tokens.size() << " tokens";
  bool ignore_merges = false;
  if (spec.model == "llama" || spec.model == "gemma4") {
    set_spm_pipeline(spec, t);
  } else {
    t.pre = pre_tokenizer_by_name(spec.pre, &ignore_merges);
  }
  const size_t n = spec.tokens.size();
  t.id_to_token = spec.tokens;
  t.has_id.assign(n, 1);
  t.vocab.reserve(n * 2);
  for (size_t i = 0; i < n; ++i) t.vocab.emplace(spec.tokens[i], static_cast<int32_t>(i));  // first wins
  TEMPER_CHECK(spec.token_attrs.empty() || spec.token_attrs.size() == spec.tokens.size())
      << "TokenizerSpec: " << spec.token_attrs.size() << " token attributes (token_attrs) for " << spec.tokens.size()
      << " tokens";
  t.check_id(spec.bos_id, "bos_id");
  t.check_id(spec.eos_id, "eos_id");
  t.check_id(spec.unk_id, "unk_id");
  t.check_id(spec.pad_id, "pad_id");
  t.bos = spec.bos_id, t.eos = spec.eos_id, t.unk = spec.unk_id, t.pad = spec.pad_id;
  auto add = [&](int32_t id, bool special) {
    AddedToken a;
    a.id = id;
    a.content = spec.tokens[id];
    a.special = special;
    if (!spec.token_attrs.empty()) {
      const int32_t bits = spec.token_attrs[id];
      auto has = [&](TokenAttr attr) { return (bits & static_cast<int32_t>(attr)) != 0; };
      a.normalized = has(TokenAttr::kNormalized);
      a.lstrip = has(TokenAttr::kLstrip);
      a.rstrip = has(TokenAttr::kRstrip);
      a.single_word = has(TokenAttr::kSingleWord);
    }
    t.added.push_back(std::move(a));
  };
  if (spec.token_types.empty()) {
    for (int32_t id : {spec.bos_id, spec.eos_id, spec.unk_id, spec.pad_id}) {
      bool seen = false;
      for (const AddedToken& a : t.added) seen = seen || a.id == id;
      if (id >= 0 && !seen) add(id, true);
    }
  } else {
    for (size_t i = 0; i < n; ++i) {
      const auto type = static_cast<TokenType>(spec.token_types[i]);
      if (type == TokenType::kControl || type == TokenType::kUnknown) add(static_cast<int32_t>(i), true);
      if (type == TokenType::kUserDefined) add(static_cast<int32_t>(i), false);
    }
  }
  t.bpe_options.unk_id = spec.unk_id;
  t.bpe_options.fuse_unk = true;
  t.bpe_options.ignore_merges = ignore_merges;
  TEMPER_CHECK(!spec.add_bos || spec.bos_id >= 0) << "TokenizerSpec: add_bos is set but there is no bos_id";
  TEMPER_CHECK(!spec.add_eos || spec.eos_id >= 0) << "TokenizerSpec: add_eos is set but there is no eos_id";
  if (spec.add_bos) t.prefix.push_back(spec.bos_id);
  if (spec.add_eos) t.suffix.push_back(spec.eos_id);
  t.chat_template = spec.chat_template;
  t.finish(spec.merges, "TokenizerSpec: tokenizer.ggml.merges");
  return detail::TokenizerImpl::wrap(std::move(impl));
}

}  // namespace temper::text
