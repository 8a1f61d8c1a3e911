// Tokenizer::to_spec / to_hf_json / to_hf_config_json: a tokenizer written back as GGUF metadata
// (TokenizerSpec, as llama.cpp's convert_hf_to_gguf.py fills tokenizer.ggml.*) or as a Hugging Face
// tokenizer.json + tokenizer_config.json (tokenizers 0.21's field order and defaults). What the
// target cannot express is refused with temper::Error rather than written with other ids.
// Leaves out: model_max_length and added_tokens_decoder in the config (not kept / rebuilt by
// transformers from tokenizer.json), truncation and padding (none).
#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "temper/core/error.h"
#include "temper/text/byte_level.h"
#include "temper/text/spm_merges.h"
#include "temper/text/tokenizer.h"
#include "temper/text/tokenizer_impl.h"
#include "temper/text/utf8.h"

namespace temper::text {

namespace {

using ojson = nlohmann::ordered_json;

// True if some byte has no byte-level symbol in the vocabulary: then BPE emits the unk token.
bool bpe_needs_unk(const detail::TokenizerImpl& t) {
  for (int b = 0; b < 256; ++b) {
    if (!t.vocab.count(byte_level_encode(std::string(1, static_cast<char>(b))))) return true;
  }
  return false;
}

std::string show_ids(const std::vector<int32_t>& ids) {
  std::string s = "[";
  for (size_t i = 0; i < ids.size(); ++i) s += (i ? ", " : "") + std::to_string(ids[i]);
  return s + "]";
}

// Whether the ids encode(add_special=true) adds are exactly [id] (or nothing): what add_bos_token /
// add_eos_token can say.
bool is_none_or(const std::vector<int32_t>& ids, int32_t id) {
  return ids.empty() || (ids.size() == 1 && ids[0] == id);
}

void check_utf8(const detail::TokenizerImpl& t, const std::string& s, const std::string& what) {
  TEMPER_CHECK(utf8_valid(s)) << t.source << ": cannot write tokenizer.json: " << what
                              << " is not valid UTF-8 (JSON strings cannot hold it)";
}

ojson byte_level_json(bool add_prefix_space, bool trim_offsets, bool use_regex) {
  return ojson{{"type", "ByteLevel"},
               {"add_prefix_space", add_prefix_space},
               {"trim_offsets", trim_offsets},
               {"use_regex", use_regex}};
}

const char* prepend_scheme_name(PrependScheme scheme) {
  switch (scheme) {
    case PrependScheme::kAlways:
      return "always";
    case PrependScheme::kFirst:
      return "first";
    case PrependScheme::kNever:
      break;
  }
  return "never";
}

ojson split_json(const SplitStep& step) {
  static const char* kBehavior[] = {"Isolated", "MergedWithPrevious", "MergedWithNext"};
  switch (step.kind) {
    case SplitKind::kDigitsIndividual:
    case SplitKind::kDigitsContiguous:
      return ojson{{"type", "Digits"}, {"individual_digits", step.kind == SplitKind::kDigitsIndividual}};
    case SplitKind::kRegex:
    case SplitKind::kString:
      break;
  }
  return ojson{{"type", "Split"},
               {"pattern", {{step.kind == SplitKind::kRegex ? "Regex" : "String", step.regex.pattern()}}},
               {"behavior", kBehavior[static_cast<int>(step.behavior)]},
               {"invert", false}};
}

// The pre-tokenizer: null (no step), one step, or a Sequence.
ojson pre_tokenizer_json(const PreTokenizer& pre) {
  ojson steps = ojson::array();
  for (const SplitStep& step : pre.splits()) steps.push_back(split_json(step));
  if (pre.has_byte_level()) steps.push_back(byte_level_json(pre.add_prefix_space(), true, pre.byte_level_regex()));
  if (const MetaspaceStep* m = pre.metaspace()) {
    steps.push_back(ojson{{"type", "Metaspace"},
                          {"replacement", m->replacement},
                          {"prepend_scheme", prepend_scheme_name(m->scheme)},
                          {"split", m->split}});
  }
  if (steps.empty()) return nullptr;
  if (steps.size() == 1) return steps[0];
  return ojson{{"type", "Sequence"}, {"pretokenizers", std::move(steps)}};
}

ojson normalizer_json(const Normalizer& norm) {
  ojson steps = ojson::array();
  for (const NormalizerStep& n : norm.steps()) {
    switch (n.kind) {
      case NormalizerKind::kNfc:
        steps.push_back(ojson{{"type", "NFC"}});
        break;
      case NormalizerKind::kPrepend:
        steps.push_back(ojson{{"type", "Prepend"}, {"prepend", n.content}});
        break;
      case NormalizerKind::kReplace:
        steps.push_back(ojson{{"type", "Replace"}, {"pattern", {{"String", n.pattern}}}, {"content", n.content}});
        break;
    }
  }
  if (steps.empty()) return nullptr;
  if (steps.size() == 1) return steps[0];
  return ojson{{"type", "Sequence"}, {"normalizers", std::move(steps)}};
}

ojson decoder_step_json(const DecoderStep& d) {
  switch (d.kind) {
    case DecoderKind::kByteLevel:
      return byte_level_json(true, true, true);
    case DecoderKind::kByteFallback:
      return ojson{{"type", "ByteFallback"}};
    case DecoderKind::kFuse:
      return ojson{{"type", "Fuse"}};
    case DecoderKind::kReplace:
      return ojson{{"type", "Replace"}, {"pattern", {{"String", d.pattern}}}, {"content", d.content}};
    case DecoderKind::kStrip:
      return ojson{{"type", "Strip"}, {"content", d.content}, {"start", d.start}, {"stop", d.stop}};
    case DecoderKind::kMetaspace:
      break;
  }
  return ojson{{"type", "Metaspace"},
               {"replacement", d.pattern},
               {"prepend_scheme", prepend_scheme_name(d.scheme)},
               {"split", d.split}};
}

// The decoder: a byte-level tokenizer built from GGUF has no chain (ByteLevel, with ByteFallback first
// where the decoder had it); otherwise the chain as read.
ojson decoder_json(const detail::TokenizerImpl& t) {
  if (t.decoder.steps().empty()) {
    ojson decoder = byte_level_json(true, true, true);
    if (!t.decode_byte_fallback) return decoder;
    return ojson{{"type", "Sequence"}, {"decoders", {ojson{{"type", "ByteFallback"}}, decoder}}};
  }
  if (t.decoder.steps().size() == 1) return decoder_step_json(t.decoder.steps()[0]);
  ojson steps = ojson::array();
  for (const DecoderStep& d : t.decoder.steps()) steps.push_back(decoder_step_json(d));
  return ojson{{"type", "Sequence"}, {"decoders", std::move(steps)}};
}

// ByteLevel (offsets only), or ByteLevel + TemplateProcessing when special tokens go around the
// text (transformers' LlamaTokenizerFast writes the same single/pair templates).
ojson post_processor_json(const detail::TokenizerImpl& t) {
  ojson byte_level = byte_level_json(true, false, true);
  if (t.prefix.empty() && t.suffix.empty()) return t.byte_level ? byte_level : ojson(nullptr);
  ojson specials = ojson::object();
  auto special = [&](int32_t id, int type_id) {
    const std::string& name = t.id_to_token[id];
    specials[name] = ojson{{"id", name}, {"ids", ojson::array({id})}, {"tokens", ojson::array({name})}};
    return ojson{{"SpecialToken", {{"id", name}, {"type_id", type_id}}}};
  };
  auto sequence = [](const char* id, int type_id) { return ojson{{"Sequence", {{"id", id}, {"type_id", type_id}}}}; };
  ojson single = ojson::array(), pair = ojson::array();
  for (int32_t id : t.prefix) single.push_back(special(id, 0)), pair.push_back(special(id, 0));
  single.push_back(sequence("A", 0));
  pair.push_back(sequence("A", 0));
  for (int32_t id : t.suffix) single.push_back(special(id, 0)), pair.push_back(special(id, 0));
  for (int32_t id : t.prefix) pair.push_back(special(id, 1));
  pair.push_back(sequence("B", 1));
  for (int32_t id : t.suffix) pair.push_back(special(id, 1));
  ojson tp = {{"type", "TemplateProcessing"}, {"single", single}, {"pair", pair}, {"special_tokens", specials}};
  if (!t.byte_level) return tp;
  return ojson{{"type", "Sequence"}, {"processors", {byte_level, tp}}};
}

// transformers' GGUF converter's merges for a tokenizer read from GGUF model "llama" (scores).
std::vector<std::pair<std::string, std::string>> spm_merges(const detail::TokenizerImpl& t) {
  return spm_merges_from_scores(t.id_to_token, t.scores);
}

ojson token_or_null(const detail::TokenizerImpl& t, int32_t id) {
  return id >= 0 ? ojson(t.id_to_token[id]) : ojson(nullptr);
}

}  // namespace

namespace {

// GGUF model "gpt2": the pre-tokenizer must have a llama.cpp name, no byte fallback, unk as llama.cpp uses it.
void spec_byte_level(const detail::TokenizerImpl& t, const std::string& fail, TokenizerSpec& s) {
  s.model = "gpt2";
  s.pre = pre_tokenizer_name_of(t.pre, t.bpe_options.ignore_merges);
  TEMPER_CHECK(!s.pre.empty())
      << fail << "the pre-tokenizer " << t.pre.describe() << (t.bpe_options.ignore_merges ? " with" : " without")
      << " ignore_merges has no llama.cpp name (tokenizer.ggml.pre). Known: gpt2 = ByteLevel(GPT-2 regex); "
      << "smollm = Digits(individual_digits) + ByteLevel(GPT-2 regex); llama-bpe = Split(Llama-3 regex) + "
      << "ByteLevel(no regex) with ignore_merges; qwen2 = Split(Qwen2 regex) + ByteLevel(no regex); all without "
      << "add_prefix_space. Keep the model in Hugging Face format";
  TEMPER_CHECK(!t.bpe_options.byte_fallback)
      << fail << "model.byte_fallback is set; GGUF's byte-level model (gpt2) has no byte fallback";
  TEMPER_CHECK(!t.decode_byte_fallback)
      << fail << "the decoder has ByteFallback; GGUF's byte-level model (gpt2) decodes <0xAB> tokens as text";
  if (bpe_needs_unk(t)) {
    TEMPER_CHECK(t.bpe_options.unk_id == t.unk && (t.unk < 0 || t.bpe_options.fuse_unk))
        << fail << "the vocabulary lacks some byte symbols, so BPE emits its unk token (id " << t.bpe_options.unk_id
        << ", fuse_unk " << t.bpe_options.fuse_unk << "); GGUF uses unk_id (" << t.unk << ") fused";
  }
  s.merges = t.merges;
}

// add_space_prefix of a SentencePiece-style tokenizer.json pipeline llama.cpp runs the same way:
// normalizer [Prepend("▁"),] Replace(" ", "▁"), no pre-tokenizer but a Split on " " (which finds
// no space left). Throws otherwise.
bool spm_space_prefix(const detail::TokenizerImpl& t, const std::string& fail) {
  const std::string space = "\xE2\x96\x81";
  const auto& n = t.normalizer.steps();
  const bool replace =
      !n.empty() && n.back().kind == NormalizerKind::kReplace && n.back().pattern == " " && n.back().content == space;
  const bool prepend = n.size() == 2 && n[0].kind == NormalizerKind::kPrepend && n[0].content == space;
  TEMPER_CHECK(replace && (n.size() == 1 || prepend))
      << fail << "the normalizer " << t.normalizer.describe() << " with the pre-tokenizer " << t.pre.describe()
      << " is not what llama.cpp's SentencePiece model does (normalizer [Prepend(▁),] Replace(' ' -> ▁), no "
      << "pre-tokenizer: Metaspace's prefix differs after added tokens). Keep the model in Hugging Face format";
  const auto& sp = t.pre.splits();
  const bool no_op_split = sp.size() == 1 && sp[0].kind == SplitKind::kString && sp[0].regex.pattern() == " ";
  TEMPER_CHECK(!t.pre.metaspace() && (sp.empty() || no_op_split))
      << fail << "the pre-tokenizer " << t.pre.describe()
      << " splits the text; llama.cpp's SentencePiece model merges across the whole text. Keep the model in "
         "Hugging Face format";
  return prepend;
}

// GGUF model "llama": scores (as read, or derived from the merges), add_space_prefix, byte tokens;
// "gemma4" (read from GGUF): its merges, scores and types as read.
void spec_spm(const detail::TokenizerImpl& t, const std::string& fail, TokenizerSpec& s) {
  s.model = "llama";
  s.pre = "default";
  if (!t.gguf_model.empty()) {  // read from GGUF: written back as it was
    s.model = t.gguf_model;
    if (t.gguf_model != "llama") s.pre.clear(), s.merges = t.merges;
    s.scores = t.scores;
    s.add_space_prefix = t.add_space_prefix;
    if (!t.token_types.empty()) s.token_types = t.token_types;
    return;
  }
  s.add_space_prefix = spm_space_prefix(t, fail);
  bool all_bytes = true;
  for (int b = 0; b < 256; ++b) {
    char hex[8];
    std::snprintf(hex, sizeof(hex), "<0x%02X>", b);
    auto it = t.vocab.find(hex);
    all_bytes = all_bytes && it != t.vocab.end();
    if (it != t.vocab.end() && s.token_types[it->second] == static_cast<int32_t>(TokenType::kNormal)) {
      s.token_types[it->second] = static_cast<int32_t>(TokenType::kByte);
    }
  }
  TEMPER_CHECK(t.bpe_options.byte_fallback && all_bytes)
      << fail << "llama.cpp's SentencePiece model writes characters outside the vocabulary as <0xAB> tokens; this "
      << "tokenizer has "
      << (t.bpe_options.byte_fallback ? "byte_fallback but not all 256 byte tokens" : "no byte_fallback");
  TEMPER_CHECK(t.bpe_options.unk_id == t.unk)
      << fail << "model.unk_token (id " << t.bpe_options.unk_id << ") differs from unk_id (" << t.unk << ")";
  if (t.unk >= 0 && s.token_types[t.unk] == static_cast<int32_t>(TokenType::kControl)) {
    s.token_types[t.unk] = static_cast<int32_t>(TokenType::kUnknown);
  }
  s.scores = spm_scores_from_merges(s.tokens, t.vocab, t.merges, fail);
}

// Tokens (gaps as "[PAD<id>]" of type unused), types of the added tokens, their options as token_attrs.
void spec_tokens(const detail::TokenizerImpl& t, TokenizerSpec& s) {
  const int32_t n = static_cast<int32_t>(t.id_to_token.size());
  s.tokens.resize(n);
  s.token_types.assign(n, static_cast<int32_t>(TokenType::kNormal));
  for (int32_t id = 0; id < n; ++id) {
    if (t.has_id[id]) {
      s.tokens[id] = t.id_to_token[id];
    } else {
      s.tokens[id] = "[PAD" + std::to_string(id) + "]";  // as convert_hf_to_gguf.py fills gaps
      s.token_types[id] = static_cast<int32_t>(TokenType::kUnused);
    }
  }
  bool any_attr = false;
  std::vector<int32_t> attrs(n, 0);
  for (const AddedToken& a : t.added) {
    s.token_types[a.id] = static_cast<int32_t>(a.special ? TokenType::kControl : TokenType::kUserDefined);
    int32_t bits = 0;
    if (a.normalized) bits |= static_cast<int32_t>(TokenAttr::kNormalized);
    if (a.lstrip) bits |= static_cast<int32_t>(TokenAttr::kLstrip);
    if (a.rstrip) bits |= static_cast<int32_t>(TokenAttr::kRstrip);
    if (a.single_word) bits |= static_cast<int32_t>(TokenAttr::kSingleWord);
    attrs[a.id] = bits;
    any_attr = any_attr || bits != 0;
  }
  if (any_attr) s.token_attrs = std::move(attrs);
}

}  // namespace

TokenizerSpec Tokenizer::to_spec() const {
  const detail::TokenizerImpl& t = *impl_;
  const std::string fail = t.source + ": cannot write the tokenizer as GGUF metadata (TokenizerSpec): ";
  TokenizerSpec s;
  TEMPER_CHECK(is_none_or(t.prefix, t.bos))
      << fail << "encode(add_special) puts " << show_ids(t.prefix) << " before the text; GGUF can only say [bos_id] ("
      << t.bos << ") with add_bos_token";
  TEMPER_CHECK(is_none_or(t.suffix, t.eos))
      << fail << "encode(add_special) puts " << show_ids(t.suffix) << " after the text; GGUF can only say [eos_id] ("
      << t.eos << ") with add_eos_token";
  spec_tokens(t, s);
  if (t.byte_level) {
    spec_byte_level(t, fail, s);
  } else {
    spec_spm(t, fail, s);
  }
  s.bos_id = t.bos, s.eos_id = t.eos, s.unk_id = t.unk, s.pad_id = t.pad;
  s.add_bos = !t.prefix.empty();
  s.add_eos = !t.suffix.empty();
  s.chat_template = t.chat_template;
  return s;
}

std::string Tokenizer::to_hf_json() const {
  const detail::TokenizerImpl& t = *impl_;

  std::vector<AddedToken> added = t.added;
  std::stable_sort(added.begin(), added.end(), [](const AddedToken& a, const AddedToken& b) { return a.id < b.id; });
  ojson added_json = ojson::array();
  for (const AddedToken& a : added) {
    check_utf8(t, a.content, "added token " + std::to_string(a.id));
    added_json.push_back(ojson{{"id", a.id},
                               {"content", a.content},
                               {"single_word", a.single_word},
                               {"lstrip", a.lstrip},
                               {"rstrip", a.rstrip},
                               {"normalized", a.normalized},
                               {"special", a.special}});
  }

  // The vocabulary in id order. Appended to ordered_json's underlying vector directly: its
  // operator[] searches linearly, and the keys of an unordered_map are unique anyway.
  std::vector<const std::pair<const std::string, int32_t>*> entries;
  entries.reserve(t.vocab.size());
  for (const auto& e : t.vocab) entries.push_back(&e);
  std::sort(entries.begin(), entries.end(), [](const auto* a, const auto* b) {
    return a->second != b->second ? a->second < b->second : a->first < b->first;
  });
  ojson vocab = ojson::object();
  auto& vocab_items = static_cast<ojson::object_t::Container&>(vocab.get_ref<ojson::object_t&>());
  vocab_items.reserve(entries.size());
  for (const auto* e : entries) {
    check_utf8(t, e->first, "vocabulary token " + std::to_string(e->second));
    vocab_items.emplace_back(e->first, ojson(e->second));
  }
  const std::vector<std::pair<std::string, std::string>> merge_list = t.use_spm ? spm_merges(t) : t.merges;
  ojson merges = ojson::array();
  merges.get_ref<ojson::array_t&>().reserve(merge_list.size());
  for (const auto& [a, b] : merge_list) merges.push_back(ojson::array({a, b}));

  ojson model = {{"type", "BPE"},
                 {"dropout", nullptr},
                 {"unk_token", token_or_null(t, t.bpe_options.unk_id)},
                 {"continuing_subword_prefix", nullptr},
                 {"end_of_word_suffix", nullptr},
                 {"fuse_unk", t.bpe_options.fuse_unk},
                 {"byte_fallback", t.bpe_options.byte_fallback},
                 {"ignore_merges", t.bpe_options.ignore_merges}};
  model["vocab"] = std::move(vocab);
  model["merges"] = std::move(merges);

  ojson root = {{"version", "1.0"}, {"truncation", nullptr}, {"padding", nullptr}};
  root["added_tokens"] = std::move(added_json);
  root["normalizer"] = normalizer_json(t.normalizer);
  root["pre_tokenizer"] = pre_tokenizer_json(t.pre);
  root["post_processor"] = post_processor_json(t);
  root["decoder"] = decoder_json(t);
  root["model"] = std::move(model);
  return root.dump(2);
}

std::string Tokenizer::to_hf_config_json() const {
  const detail::TokenizerImpl& t = *impl_;
  ojson cfg = ojson::object();
  // add_bos_token / add_eos_token override the post-processor when read back (transformers' Llama
  // and GPT-2 fast tokenizers); written only where they say the same as it.
  if (is_none_or(t.prefix, t.bos)) cfg["add_bos_token"] = !t.prefix.empty();
  if (is_none_or(t.suffix, t.eos)) cfg["add_eos_token"] = !t.suffix.empty();
  cfg["bos_token"] = token_or_null(t, t.bos);
  cfg["eos_token"] = token_or_null(t, t.eos);
  cfg["unk_token"] = token_or_null(t, t.unk);
  cfg["pad_token"] = token_or_null(t, t.pad);
  if (!t.chat_template.empty()) cfg["chat_template"] = t.chat_template;
  cfg["clean_up_tokenization_spaces"] = false;
  cfg["tokenizer_class"] = "PreTrainedTokenizerFast";
  for (int32_t id : {t.bos, t.eos, t.unk, t.pad}) {
    if (id >= 0) check_utf8(t, t.id_to_token[id], "token " + std::to_string(id));
  }
  check_utf8(t, t.chat_template, "the chat template");
  return cfg.dump(2);
}

}  // namespace temper::text
