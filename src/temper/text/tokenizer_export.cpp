// Tokenizer::to_spec / to_hf_json / to_hf_config_json: a tokenizer written back as GGUF metadata
// (TokenizerSpec, as llama.cpp's convert_hf_to_gguf.py fills tokenizer.ggml.*) or as a Hugging Face
// tokenizer.json + tokenizer_config.json (tokenizers 0.21's field order and defaults). What the
// target cannot express is refused with temper::Error rather than written with other ids.
// Leaves out: model_max_length and added_tokens_decoder in the config (not kept / rebuilt by
// transformers from tokenizer.json), truncation and padding (none).
#include <algorithm>
#include <nlohmann/json.hpp>

#include "temper/core/error.h"
#include "temper/text/byte_level.h"
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

ojson pre_tokenizer_json(const PreTokenizer& pre) {
  ojson byte_level = byte_level_json(pre.add_prefix_space(), true, pre.byte_level_regex());
  if (pre.splits().empty()) return byte_level;
  ojson steps = ojson::array();
  for (const SplitStep& step : pre.splits()) {
    switch (step.kind) {
      case SplitKind::kDigitsIndividual:
      case SplitKind::kDigitsContiguous:
        steps.push_back(ojson{{"type", "Digits"}, {"individual_digits", step.kind == SplitKind::kDigitsIndividual}});
        break;
      case SplitKind::kRegex:
      case SplitKind::kString:
        steps.push_back(
            ojson{{"type", "Split"},
                  {"pattern", {{step.kind == SplitKind::kRegex ? "Regex" : "String", step.regex.pattern()}}},
                  {"behavior", "Isolated"},
                  {"invert", false}});
        break;
    }
  }
  steps.push_back(std::move(byte_level));
  return ojson{{"type", "Sequence"}, {"pretokenizers", std::move(steps)}};
}

// ByteLevel (offsets only), or ByteLevel + TemplateProcessing when special tokens go around the
// text (transformers' LlamaTokenizerFast writes the same single/pair templates).
ojson post_processor_json(const detail::TokenizerImpl& t) {
  ojson byte_level = byte_level_json(true, false, true);
  if (t.prefix.empty() && t.suffix.empty()) return byte_level;
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
  return ojson{{"type", "Sequence"}, {"processors", {byte_level, tp}}};
}

ojson token_or_null(const detail::TokenizerImpl& t, int32_t id) {
  return id >= 0 ? ojson(t.id_to_token[id]) : ojson(nullptr);
}

}  // namespace

TokenizerSpec Tokenizer::to_spec() const {
  const detail::TokenizerImpl& t = *impl_;
  const std::string fail = t.source + ": cannot write the tokenizer as GGUF metadata (TokenizerSpec): ";
  TokenizerSpec s;
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
  TEMPER_CHECK(is_none_or(t.prefix, t.bos))
      << fail << "encode(add_special) puts " << show_ids(t.prefix) << " before the text; GGUF can only say [bos_id] ("
      << t.bos << ") with add_bos_token";
  TEMPER_CHECK(is_none_or(t.suffix, t.eos))
      << fail << "encode(add_special) puts " << show_ids(t.suffix) << " after the text; GGUF can only say [eos_id] ("
      << t.eos << ") with add_eos_token";
  if (bpe_needs_unk(t)) {
    TEMPER_CHECK(t.bpe_options.unk_id == t.unk && (t.unk < 0 || t.bpe_options.fuse_unk))
        << fail << "the vocabulary lacks some byte symbols, so BPE emits its unk token (id " << t.bpe_options.unk_id
        << ", fuse_unk " << t.bpe_options.fuse_unk << "); GGUF uses unk_id (" << t.unk << ") fused";
  }

  const int32_t n = vocab_size();
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
  s.merges = t.merges;
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
  ojson merges = ojson::array();
  merges.get_ref<ojson::array_t&>().reserve(t.merges.size());
  for (const auto& [a, b] : t.merges) merges.push_back(ojson::array({a, b}));

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

  ojson decoder = byte_level_json(true, true, true);
  if (t.decode_byte_fallback) {
    decoder = ojson{{"type", "Sequence"}, {"decoders", {ojson{{"type", "ByteFallback"}}, decoder}}};
  }

  ojson root = {{"version", "1.0"}, {"truncation", nullptr}, {"padding", nullptr}};
  root["added_tokens"] = std::move(added_json);
  root["normalizer"] = t.nfc ? ojson{{"type", "NFC"}} : ojson(nullptr);
  root["pre_tokenizer"] = pre_tokenizer_json(t.pre);
  root["post_processor"] = post_processor_json(t);
  root["decoder"] = std::move(decoder);
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
