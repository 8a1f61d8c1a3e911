// Tokenizer::from_hf_files: reads a Hugging Face tokenizer.json (model BPE with vocab and merges in
// either form, added_tokens, normalizer, pre_tokenizer, post_processor, decoder; byte-level or
// SentencePiece-style, told apart by the ByteLevel step) and optionally
// tokenizer_config.json (bos/eos/pad/unk tokens, add_bos_token/add_eos_token, chat_template), as
// tokenizers 0.21 / transformers 4.51 read them. Every error names the file and the field.
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "temper/core/error.h"
#include "temper/core/log.h"
#include "temper/text/tokenizer.h"
#include "temper/text/tokenizer_impl.h"
#include "temper/text/utf8.h"

namespace temper::text {

namespace {

using json = nlohmann::json;

std::string read_file(const std::string& path, const char* what) {
  std::ifstream f(path, std::ios::binary);
  TEMPER_CHECK(f.good()) << path << ": cannot open the " << what;
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

json parse(std::string_view text, const std::string& name) {
  try {
    return json::parse(text.begin(), text.end());
  } catch (const json::parse_error& e) {
    TEMPER_FAIL() << name << ": not valid JSON: " << e.what();
  }
}

std::string type_name(const json& j) {
  return j.type_name();
}

class Reader {
 public:
  explicit Reader(std::string file) : file_(std::move(file)) {}
  const std::string& file() const { return file_; }

  [[noreturn]] void fail(const std::string& field, const std::string& msg) const {
    TEMPER_FAIL() << file_ << ": " << field << ": " << msg;
  }
  const json& member(const json& obj, const char* key, const std::string& field) const {
    if (!obj.is_object()) fail(field, "expected an object, found " + type_name(obj));
    auto it = obj.find(key);
    if (it == obj.end()) fail(field.empty() ? key : field + "." + key, "missing");
    return *it;
  }
  std::string str(const json& j, const std::string& field) const {
    if (!j.is_string()) fail(field, "expected a string, found " + type_name(j));
    return j.get<std::string>();
  }
  bool boolean(const json& obj, const char* key, bool dflt, const std::string& field) const {
    auto it = obj.find(key);
    if (it == obj.end() || it->is_null()) return dflt;
    if (!it->is_boolean())
      fail(field.empty() ? std::string(key) : field + "." + key, "expected true or false, found " + type_name(*it));
    return it->get<bool>();
  }
  int32_t id(const json& j, const std::string& field) const {
    if (!j.is_number_integer() || j.get<int64_t>() < 0 || j.get<int64_t>() > INT32_MAX) {
      fail(field, "expected a non-negative integer id, found " + j.dump());
    }
    return static_cast<int32_t>(j.get<int64_t>());
  }

 private:
  std::string file_;
};

// A {"String": s} or {"Regex": r} pattern (field f); only String where regex_ok is false.
Regex read_pattern(const Reader& r, const json& pat, const std::string& f, bool regex_ok) {
  if (pat.is_object() && pat.contains("String")) {
    return Regex(r.str(pat["String"], f + ".String"), r.file() + ": " + f + ".String", /*literal=*/true);
  }
  if (regex_ok && pat.is_object() && pat.contains("Regex")) {
    return Regex(r.str(pat["Regex"], f + ".Regex"), r.file() + ": " + f + ".Regex");
  }
  r.fail(f, std::string("expected {\"String\": ...}") + (regex_ok ? " or {\"Regex\": ...}" : "") + ", found " +
                pat.dump());
}

// Metaspace's prepend_scheme (tokenizers 0.21), or the older add_prefix_space flag.
PrependScheme read_prepend_scheme(const Reader& r, const json& j, const std::string& field) {
  if (j.contains("prepend_scheme") && !j["prepend_scheme"].is_null()) {
    const std::string s = r.str(j["prepend_scheme"], field + ".prepend_scheme");
    if (s == "always") return PrependScheme::kAlways;
    if (s == "first") return PrependScheme::kFirst;
    if (s == "never") return PrependScheme::kNever;
    r.fail(field + ".prepend_scheme", "'" + s + "' is not one of always, first, never");
  }
  return r.boolean(j, "add_prefix_space", true, field) ? PrependScheme::kAlways : PrependScheme::kNever;
}

MetaspaceStep read_metaspace(const Reader& r, const json& j, const std::string& field) {
  MetaspaceStep m;
  if (j.contains("replacement")) m.replacement = r.str(j["replacement"], field + ".replacement");
  if (m.replacement.empty()) r.fail(field + ".replacement", "empty");
  m.scheme = read_prepend_scheme(r, j, field);
  m.split = r.boolean(j, "split", true, field);
  return m;
}

void read_split(const Reader& r, const json& j, const std::string& field, PreTokenizer& pre) {
  const std::string behavior = r.str(r.member(j, "behavior", field), field + ".behavior");
  SplitBehavior b = SplitBehavior::kIsolated;
  if (behavior == "MergedWithPrevious") {
    b = SplitBehavior::kMergedWithPrevious;
  } else if (behavior == "MergedWithNext") {
    b = SplitBehavior::kMergedWithNext;
  } else if (behavior != "Isolated") {
    r.fail(field + ".behavior",
           "'" + behavior + "' is not supported (supported: Isolated, MergedWithPrevious, MergedWithNext)");
  }
  if (r.boolean(j, "invert", false, field)) r.fail(field + ".invert", "true is not supported");
  pre.add_split(read_pattern(r, r.member(j, "pattern", field), field + ".pattern", true), b);
}

void read_pre_tokenizer(const Reader& r, const json& j, const std::string& field, PreTokenizer& pre) {
  const std::string type = r.str(r.member(j, "type", field), field + ".type");
  if (type == "Sequence") {
    const json& list = r.member(j, "pretokenizers", field);
    if (!list.is_array()) r.fail(field + ".pretokenizers", "expected an array");
    for (size_t i = 0; i < list.size(); ++i) {
      read_pre_tokenizer(r, list[i], field + ".pretokenizers[" + std::to_string(i) + "]", pre);
    }
  } else if (type == "ByteLevel") {
    // tokenizers' serde defaults: add_prefix_space true, use_regex true.
    pre.set_byte_level(r.boolean(j, "add_prefix_space", true, field), r.boolean(j, "use_regex", true, field));
  } else if (type == "Metaspace") {
    pre.set_metaspace(read_metaspace(r, j, field));
  } else if (type == "Split") {
    read_split(r, j, field, pre);
  } else if (type == "Digits") {
    pre.add_digits(r.boolean(j, "individual_digits", false, field));
  } else {
    r.fail(field + ".type",
           "pre-tokenizer '" + type + "' is not supported (supported: ByteLevel, Metaspace, Split, Digits, Sequence)");
  }
}

void read_normalizer(const Reader& r, const json& j, const std::string& field, Normalizer& norm) {
  if (j.is_null()) return;
  const std::string type = r.str(r.member(j, "type", field), field + ".type");
  if (type == "Sequence") {
    const json& list = r.member(j, "normalizers", field);
    if (!list.is_array()) r.fail(field + ".normalizers", "expected an array");
    for (size_t i = 0; i < list.size(); ++i) {
      read_normalizer(r, list[i], field + ".normalizers[" + std::to_string(i) + "]", norm);
    }
  } else if (type == "NFC") {
    norm.add_nfc();
  } else if (type == "Prepend") {
    norm.add_prepend(r.str(r.member(j, "prepend", field), field + ".prepend"));
  } else if (type == "Replace") {
    const Regex pat = read_pattern(r, r.member(j, "pattern", field), field + ".pattern", false);
    if (pat.pattern().empty()) r.fail(field + ".pattern.String", "empty");
    norm.add_replace(pat.pattern(), r.str(r.member(j, "content", field), field + ".content"));
  } else {
    r.fail(field + ".type",
           "normalizer '" + type + "' is not supported (supported: NFC, Prepend, Replace with a String, Sequence)");
  }
}

void read_decoder(const Reader& r, const json& j, const std::string& field, Decoder& dec) {
  const std::string type = r.str(r.member(j, "type", field), field + ".type");
  if (type == "Sequence") {
    const json& list = r.member(j, "decoders", field);
    if (!list.is_array()) r.fail(field + ".decoders", "expected an array");
    for (size_t i = 0; i < list.size(); ++i) {
      read_decoder(r, list[i], field + ".decoders[" + std::to_string(i) + "]", dec);
    }
  } else if (type == "ByteLevel") {
    dec.add(decoder_step(DecoderKind::kByteLevel));
  } else if (type == "ByteFallback") {
    dec.add(decoder_step(DecoderKind::kByteFallback));
  } else if (type == "Fuse") {
    dec.add(decoder_step(DecoderKind::kFuse));
  } else if (type == "Replace") {
    const Regex pat = read_pattern(r, r.member(j, "pattern", field), field + ".pattern", false);
    if (pat.pattern().empty()) r.fail(field + ".pattern.String", "empty");
    dec.add(
        decoder_step(DecoderKind::kReplace, pat.pattern(), r.str(r.member(j, "content", field), field + ".content")));
  } else if (type == "Strip") {
    DecoderStep s = decoder_step(DecoderKind::kStrip);
    s.content = r.str(r.member(j, "content", field), field + ".content");
    if (s.content.empty() || utf8_next(s.content, 0).len != static_cast<int>(s.content.size())) {
      r.fail(field + ".content", "expected one character, found '" + s.content + "'");
    }
    s.start = r.id(r.member(j, "start", field), field + ".start");
    s.stop = r.id(r.member(j, "stop", field), field + ".stop");
    dec.add(std::move(s));
  } else if (type == "Metaspace") {
    const MetaspaceStep m = read_metaspace(r, j, field);
    DecoderStep s = decoder_step(DecoderKind::kMetaspace, m.replacement);
    s.scheme = m.scheme;
    s.split = m.split;
    dec.add(std::move(s));
  } else {
    r.fail(field + ".type", "decoder '" + type +
                                "' is not supported (supported: ByteLevel, ByteFallback, Fuse, Replace with a "
                                "String, Strip, Metaspace, Sequence of those)");
  }
}

// The special tokens a post-processor puts around a single sequence.
void read_post_processor(const Reader& r, const json& j, const std::string& field, std::vector<int32_t>& prefix,
                         std::vector<int32_t>& suffix) {
  if (j.is_null()) return;
  const std::string type = r.str(r.member(j, "type", field), field + ".type");
  if (type == "Sequence") {
    const json& list = r.member(j, "processors", field);
    for (size_t i = 0; i < list.size(); ++i) {
      read_post_processor(r, list[i], field + ".processors[" + std::to_string(i) + "]", prefix, suffix);
    }
  } else if (type == "ByteLevel") {
    // Offsets only.
  } else if (type == "TemplateProcessing") {
    const json& single = r.member(j, "single", field);
    const json& specials = r.member(j, "special_tokens", field);
    if (!single.is_array()) r.fail(field + ".single", "expected an array");
    bool seen_sequence = false;
    for (size_t i = 0; i < single.size(); ++i) {
      const std::string f = field + ".single[" + std::to_string(i) + "]";
      if (single[i].contains("Sequence")) {
        seen_sequence = true;
      } else if (single[i].contains("SpecialToken")) {
        const std::string name =
            r.str(r.member(single[i]["SpecialToken"], "id", f + ".SpecialToken"), f + ".SpecialToken.id");
        const json& entry = r.member(specials, name.c_str(), field + ".special_tokens");
        const json& ids = r.member(entry, "ids", field + ".special_tokens." + name);
        for (const json& id : ids)
          (seen_sequence ? suffix : prefix).push_back(r.id(id, field + ".special_tokens." + name + ".ids"));
      } else {
        r.fail(f, "expected {\"Sequence\": ...} or {\"SpecialToken\": ...}, found " + single[i].dump());
      }
    }
  } else if (type == "RobertaProcessing" || type == "BertProcessing") {
    const json& cls = r.member(j, "cls", field);
    const json& sep = r.member(j, "sep", field);
    if (!cls.is_array() || cls.size() != 2) r.fail(field + ".cls", "expected [token, id]");
    if (!sep.is_array() || sep.size() != 2) r.fail(field + ".sep", "expected [token, id]");
    prefix.push_back(r.id(cls[1], field + ".cls[1]"));
    suffix.push_back(r.id(sep[1], field + ".sep[1]"));
  } else {
    r.fail(field + ".type", "post-processor '" + type +
                                "' is not supported (supported: ByteLevel, "
                                "TemplateProcessing, RobertaProcessing, BertProcessing, Sequence)");
  }
}

// A token named in tokenizer_config.json: a string, {"content": ...} (AddedToken) or null.
std::string config_token(const Reader& r, const json& cfg, const char* key) {
  auto it = cfg.find(key);
  if (it == cfg.end() || it->is_null()) return {};
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object()) return r.str(r.member(*it, "content", key), std::string(key) + ".content");
  r.fail(key, "expected a string, {\"content\": ...} or null, found " + type_name(*it));
}

using Impl = detail::TokenizerImpl;
using Merges = std::vector<std::pair<std::string, std::string>>;

// model.type, model.dropout and the subword affixes: refuses what byte-level BPE does not do.
void check_model_kind(const Reader& r, const json& model) {
  const std::string mtype = model.contains("type") ? r.str(model["type"], "model.type") : "BPE";
  if (mtype != "BPE") r.fail("model.type", "'" + mtype + "' is not supported (only BPE)");
  if (model.contains("dropout") && !model["dropout"].is_null() &&
      !(model["dropout"].is_number() && model["dropout"].get<double>() == 0.0)) {
    r.fail("model.dropout", model["dropout"].dump() + " is not supported (BPE dropout is a training-time option)");
  }
  for (const char* k : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    if (model.contains(k) && !model[k].is_null() && !r.str(model[k], std::string("model.") + k).empty()) {
      r.fail(std::string("model.") + k, "'" + model[k].get<std::string>() + "' is not supported");
    }
  }
}

// One entry of added_tokens (field f), with the defaults of tokenizers.
AddedToken read_added_token(const Reader& r, const json& j, const std::string& f) {
  AddedToken a;
  a.id = r.id(r.member(j, "id", f), f + ".id");
  a.content = r.str(r.member(j, "content", f), f + ".content");
  if (a.content.empty()) r.fail(f + ".content", "empty");
  a.special = r.boolean(j, "special", false, f);
  a.single_word = r.boolean(j, "single_word", false, f);
  a.lstrip = r.boolean(j, "lstrip", false, f);
  a.rstrip = r.boolean(j, "rstrip", false, f);
  a.normalized = r.boolean(j, "normalized", !a.special, f);
  return a;
}

// model.vocab and added_tokens: t.vocab, t.added and the id -> token table (the ids must be dense).
void read_vocabulary(const Reader& r, const json& root, const json& model, Impl& t) {
  const json& vocab = r.member(model, "vocab", "model");
  if (!vocab.is_object()) r.fail("model.vocab", "expected an object {token: id}, found " + type_name(vocab));
  int32_t max_id = -1;
  t.vocab.reserve(vocab.size() * 2);
  for (auto it = vocab.begin(); it != vocab.end(); ++it) {
    const int32_t id = r.id(it.value(), "model.vocab[\"" + it.key() + "\"]");
    t.vocab.emplace(it.key(), id);
    max_id = std::max(max_id, id);
  }
  const json& added = root.contains("added_tokens") ? root["added_tokens"] : json::array();
  if (!added.is_array()) r.fail("added_tokens", "expected an array, found " + type_name(added));
  for (size_t i = 0; i < added.size(); ++i) {
    AddedToken a = read_added_token(r, added[i], "added_tokens[" + std::to_string(i) + "]");
    max_id = std::max(max_id, a.id);
    t.added.push_back(std::move(a));
  }
  if (max_id < 0) r.fail("model.vocab", "empty");
  const size_t entries = vocab.size() + added.size();
  if (static_cast<size_t>(max_id) >= 2 * entries + 1024) {
    r.fail("model.vocab",
           "ids are not dense: largest id " + std::to_string(max_id) + " for " + std::to_string(entries) + " tokens");
  }
  t.id_to_token.assign(max_id + 1, std::string());
  t.has_id.assign(max_id + 1, 0);
  for (const auto& [tok, id] : t.vocab) {
    if (!t.has_id[id] || tok < t.id_to_token[id]) t.id_to_token[id] = tok;  // deterministic if ids repeat
    t.has_id[id] = 1;
  }
  for (const AddedToken& a : t.added) t.id_to_token[a.id] = a.content, t.has_id[a.id] = 1;
}

// model.merges in either form: "a b" or ["a", "b"].
Merges read_merges(const Reader& r, const json& model) {
  Merges merges;
  const json& jm = model.contains("merges") ? model["merges"] : json::array();
  if (!jm.is_array()) r.fail("model.merges", "expected an array, found " + type_name(jm));
  merges.reserve(jm.size());
  for (size_t i = 0; i < jm.size(); ++i) {
    const std::string f = "model.merges[" + std::to_string(i) + "]";
    if (jm[i].is_string()) {
      const std::string s = jm[i].get<std::string>();
      const size_t sp = s.find(' ');
      if (sp == std::string::npos || s.find(' ', sp + 1) != std::string::npos) {
        r.fail(f, "'" + s + "': expected two tokens separated by one space");
      }
      merges.emplace_back(s.substr(0, sp), s.substr(sp + 1));
    } else if (jm[i].is_array() && jm[i].size() == 2) {
      merges.emplace_back(r.str(jm[i][0], f + "[0]"), r.str(jm[i][1], f + "[1]"));
    } else {
      r.fail(f, "expected \"a b\" or [\"a\", \"b\"], found " + jm[i].dump());
    }
  }
  return merges;
}

// The BPE model's options: fuse_unk, byte_fallback, ignore_merges and unk_token (which must be in the vocabulary).
void read_bpe_options(const Reader& r, const json& model, Impl& t) {
  t.bpe_options.fuse_unk = r.boolean(model, "fuse_unk", false, "model");
  t.bpe_options.byte_fallback = r.boolean(model, "byte_fallback", false, "model");
  t.bpe_options.ignore_merges = r.boolean(model, "ignore_merges", false, "model");
  if (model.contains("unk_token") && !model["unk_token"].is_null()) {
    const std::string unk = r.str(model["unk_token"], "model.unk_token");
    auto it = t.vocab.find(unk);
    if (it == t.vocab.end()) r.fail("model.unk_token", "'" + unk + "' is not in model.vocab");
    t.bpe_options.unk_id = it->second;
    t.unk = it->second;
  }
}

// The pipeline around the model: normalizer, pre_tokenizer and decoder (byte-level: both ByteLevel;
// SentencePiece-style: neither, the pre-tokenizer may be null), post_processor.
void read_pipeline(const Reader& r, const json& root, Impl& t) {
  read_normalizer(r, root.contains("normalizer") ? root["normalizer"] : json(), "normalizer", t.normalizer);
  const json& pre = r.member(root, "pre_tokenizer", "");
  if (!pre.is_null()) read_pre_tokenizer(r, pre, "pre_tokenizer", t.pre);
  const json& dec = r.member(root, "decoder", "");
  if (dec.is_null()) r.fail("decoder", "null; temper needs the decoder (ByteLevel, or the SentencePiece-style chain)");
  read_decoder(r, dec, "decoder", t.decoder);
  t.byte_level = t.pre.has_byte_level();
  t.decode_byte_fallback = t.decoder.has(DecoderKind::kByteFallback);
  t.bpe_options.byte_level = t.byte_level;
  if (t.byte_level && !t.decoder.has(DecoderKind::kByteLevel)) {
    r.fail("decoder", "has no ByteLevel step but the pre-tokenizer has (byte-level BPE needs both)");
  }
  if (!t.byte_level && t.decoder.has(DecoderKind::kByteLevel)) {
    r.fail("pre_tokenizer", "has no ByteLevel step but the decoder has (byte-level BPE needs both)");
  }
  read_post_processor(r, root.contains("post_processor") ? root["post_processor"] : json(), "post_processor", t.prefix,
                      t.suffix);
  for (int32_t id : t.prefix) t.check_id(id, "post_processor special token id");
  for (int32_t id : t.suffix) t.check_id(id, "post_processor special token id");
}

// The id of the token tokenizer_config.json names under `key` (an added token first, then the vocabulary of the
// tokenizer file `name`); -1 where it names none.
int32_t config_token_id(const Reader& rc, const json& cfg, const char* key, const Impl& t, const std::string& name) {
  const std::string tok = config_token(rc, cfg, key);
  if (tok.empty()) return -1;
  for (const AddedToken& a : t.added) {
    if (a.content == tok) return a.id;
  }
  auto v = t.vocab.find(tok);
  if (v == t.vocab.end()) rc.fail(key, "'" + tok + "' is not a token of " + name);
  return v->second;
}

// add_bos_token / add_eos_token: transformers' Llama/GPT-2 fast tokenizers rebuild the post-processor from these
// flags.
void read_add_flags(const Reader& rc, const json& cfg, Impl& t) {
  if (cfg.contains("add_bos_token")) {
    t.prefix.clear();
    if (rc.boolean(cfg, "add_bos_token", false, "")) {
      if (t.bos < 0) rc.fail("add_bos_token", "true but there is no bos_token");
      t.prefix.push_back(t.bos);
    }
  }
  if (cfg.contains("add_eos_token")) {
    t.suffix.clear();
    if (rc.boolean(cfg, "add_eos_token", false, "")) {
      if (t.eos < 0) rc.fail("add_eos_token", "true but there is no eos_token");
      t.suffix.push_back(t.eos);
    }
  }
}

// chat_template: a string, or a list of {name, template} of which "default" (else the first) is taken.
void read_chat_template(const Reader& rc, const json& cfg, Impl& t) {
  if (!cfg.contains("chat_template") || cfg["chat_template"].is_null()) return;
  const json& ct = cfg["chat_template"];
  if (ct.is_string()) {
    t.chat_template = ct.get<std::string>();
  } else if (ct.is_array()) {
    for (size_t i = 0; i < ct.size(); ++i) {
      const std::string f = "chat_template[" + std::to_string(i) + "]";
      const std::string tname = rc.str(rc.member(ct[i], "name", f), f + ".name");
      if (tname == "default" || t.chat_template.empty()) {
        t.chat_template = rc.str(rc.member(ct[i], "template", f), f + ".template");
      }
    }
  } else {
    rc.fail("chat_template", "expected a string or a list of {name, template}, found " + type_name(ct));
  }
}

// tokenizer_config.json (file config_name) over what tokenizer.json (file name) set: bos/eos/pad/unk tokens,
// add_bos_token/add_eos_token, chat_template.
void read_tokenizer_config(std::string_view config_json, const std::string& config_name, const std::string& name,
                           Impl& t) {
  const Reader rc(config_name);
  const json cfg = parse(config_json, config_name);
  if (!cfg.is_object()) rc.fail("(root)", "expected an object, found " + type_name(cfg));
  if (cfg.contains("bos_token")) t.bos = config_token_id(rc, cfg, "bos_token", t, name);
  if (cfg.contains("eos_token")) t.eos = config_token_id(rc, cfg, "eos_token", t, name);
  if (cfg.contains("pad_token")) t.pad = config_token_id(rc, cfg, "pad_token", t, name);
  if (cfg.contains("unk_token") && t.unk < 0) t.unk = config_token_id(rc, cfg, "unk_token", t, name);
  read_add_flags(rc, cfg, t);
  read_chat_template(rc, cfg, t);
}

}  // namespace

static Tokenizer build_from_hf(std::string_view tokenizer_json, std::string_view config_json, const std::string& name,
                               const std::string& config_name);

Tokenizer Tokenizer::from_hf_files(const std::string& tokenizer_json, const std::string& tokenizer_config_json) {
  const std::string text = read_file(tokenizer_json, "tokenizer file");
  const std::string cfg = tokenizer_config_json.empty() ? "" : read_file(tokenizer_config_json, "tokenizer config");
  return from_hf_json(text, cfg, tokenizer_json,
                      tokenizer_config_json.empty() ? "tokenizer_config.json" : tokenizer_config_json);
}

Tokenizer Tokenizer::from_hf_json(std::string_view tokenizer_json, std::string_view config_json,
                                  const std::string& name, const std::string& config_name) {
  try {
    return build_from_hf(tokenizer_json, config_json, name, config_name);
  } catch (const nlohmann::json::exception& e) {
    // A field of an unexpected JSON type somewhere we did not check explicitly.
    TEMPER_FAIL() << name << " / " << config_name << ": unexpected JSON structure: " << e.what();
  }
}

static Tokenizer build_from_hf(std::string_view tokenizer_json, std::string_view config_json, const std::string& name,
                               const std::string& config_name) {
  const Reader r(name);
  const json root = parse(tokenizer_json, name);
  if (!root.is_object()) r.fail("(root)", "expected an object, found " + type_name(root));
  auto impl = std::make_shared<detail::TokenizerImpl>();
  detail::TokenizerImpl& t = *impl;
  t.source = name;

  const json& model = r.member(root, "model", "");
  check_model_kind(r, model);
  read_vocabulary(r, root, model, t);
  Merges merges = read_merges(r, model);
  read_bpe_options(r, model, t);
  read_pipeline(r, root, t);
  // bos: the post-processor's first special token unless tokenizer_config.json names one.
  if (!t.prefix.empty()) t.bos = t.prefix.front();
  if (!config_json.empty()) read_tokenizer_config(config_json, config_name, name, t);
  t.finish(std::move(merges), name + ": model.merges");
  return detail::TokenizerImpl::wrap(std::move(impl));
}

}  // namespace temper::text
