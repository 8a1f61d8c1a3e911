#include "temper/app/convert.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "temper/app/model_source.h"
#include "temper/core/error.h"
#include "temper/io/gguf_export.h"
#include "temper/io/hf_model_dir.h"
#include "temper/io/peft_adapter.h"

namespace temper::app {
namespace {
std::string slurp(const std::string& path) {
  if (path.empty()) return "";
  std::ifstream in(path, std::ios::binary);
  TEMPER_CHECK(in.good()) << path << ": cannot open";
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// TokenizerSpec -> llama.cpp's tokenizer.ggml.* keys (the inverse of model_source's reading).
std::vector<std::pair<std::string, io::GgufValue>> gguf_tokenizer_metadata(const text::TokenizerSpec& s) {
  using io::GgufValue;
  std::vector<std::pair<std::string, GgufValue>> kv;
  kv.emplace_back("tokenizer.ggml.model", GgufValue::string(s.model));
  if (!s.pre.empty()) kv.emplace_back("tokenizer.ggml.pre", GgufValue::string(s.pre));
  kv.emplace_back("tokenizer.ggml.tokens", GgufValue::string_array(s.tokens));
  if (!s.token_types.empty()) kv.emplace_back("tokenizer.ggml.token_type", GgufValue::i32_array(s.token_types));
  std::vector<std::string> merges;
  merges.reserve(s.merges.size());
  for (const auto& [a, b] : s.merges) merges.push_back(a + " " + b);
  if (s.model != "llama") kv.emplace_back("tokenizer.ggml.merges", GgufValue::string_array(merges));
  if (!s.scores.empty()) kv.emplace_back("tokenizer.ggml.scores", GgufValue::f32_array(s.scores));
  if (s.model == "llama") kv.emplace_back("tokenizer.ggml.add_space_prefix", GgufValue::boolean(s.add_space_prefix));
  auto id = [&](const char* key, int32_t v) {
    if (v >= 0) kv.emplace_back(key, GgufValue::u32(static_cast<uint32_t>(v)));
  };
  id("tokenizer.ggml.bos_token_id", s.bos_id);
  id("tokenizer.ggml.eos_token_id", s.eos_id);
  id("tokenizer.ggml.unknown_token_id", s.unk_id);
  id("tokenizer.ggml.padding_token_id", s.pad_id);
  kv.emplace_back("tokenizer.ggml.add_bos_token", GgufValue::boolean(s.add_bos));
  kv.emplace_back("tokenizer.ggml.add_eos_token", GgufValue::boolean(s.add_eos));
  if (!s.chat_template.empty()) kv.emplace_back("tokenizer.chat_template", GgufValue::string(s.chat_template));
  return kv;
}

int convert_to_gguf(const ConvertOptions& o, const LoadedModel& lm) {
  io::GgufExportOptions x;
  std::string dt = o.dtype.empty() ? "f16" : o.dtype;
  if (dt == "f32") x.matrix_type = io::GgmlType::f32;
  else if (dt == "f16") x.matrix_type = io::GgmlType::f16;
  else if (dt == "bf16") x.matrix_type = io::GgmlType::bf16;
  else if (dt == "q8_0") x.matrix_type = io::GgmlType::q8_0;
  else TEMPER_FAIL() << "--dtype for a GGUF export must be f32, f16, bf16 or q8_0, got '" << dt << "'";
  x.metadata = lm.gguf_meta;
  if (lm.gguf_meta.empty() && lm.tokenizer) x.metadata = gguf_tokenizer_metadata(lm.tokenizer->to_spec());
  if (x.metadata.empty())
    std::fprintf(stderr, "temper convert: warning: %s has no tokenizer; the GGUF will carry weights only\n",
                 o.in.c_str());
  io::save_gguf_model(*lm.model, o.out, x);
  std::fprintf(stderr, "temper convert: %s (%s) -> %s (GGUF, %s matrices)\n", o.in.c_str(), lm.format.c_str(),
               o.out.c_str(), dt.c_str());
  return 0;
}

}  // namespace

int convert(const ConvertOptions& o) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path in = fs::weakly_canonical(o.in, ec), out = fs::weakly_canonical(o.out, ec);
  if (fs::exists(out, ec)) {
    TEMPER_CHECK(o.overwrite) << o.out
                              << ": already exists; pass --overwrite to replace it (the new output is complete before "
                                 "the old one goes)";
    // --overwrite replaces a model, never an arbitrary directory (which could hold the input or anything else).
    bool model = fs::is_directory(out) ? fs::exists(out / "config.json") : is_gguf_path(out.string());
    TEMPER_CHECK(model) << o.out << ": --overwrite only replaces a model (a directory with config.json, or a .gguf file)";
  }
  auto inside = [](const fs::path& child, const fs::path& dir) {
    auto [d, c] = std::mismatch(dir.begin(), dir.end(), child.begin(), child.end());
    return d == dir.end();
  };
  TEMPER_CHECK(!inside(in, out)) << o.out << ": contains the input " << o.in;
  LoadedModel lm = load_model(o.in);
  if (!o.merge_lora.empty()) {
    io::merge_peft_adapter(*lm.model, o.merge_lora);
    std::fprintf(stderr, "temper convert: merged the LoRA adapter %s into %s\n", o.merge_lora.c_str(), o.in.c_str());
  }
  if (is_gguf_path(o.out)) return convert_to_gguf(o, lm);
  io::HfExportOptions x;
  std::string dt = o.dtype.empty() ? "f32" : o.dtype;
  TEMPER_CHECK(dtype_from_name(dt, &x.dtype) &&
               (x.dtype == DType::f32 || x.dtype == DType::bf16 || x.dtype == DType::f16))
      << "--dtype for a Hugging Face export must be f32, bf16 or f16, got '" << dt << "'";
  x.eos_ids = lm.eos_ids;
  x.bos_id = lm.bos_id;
  x.tokenizer_json_text = slurp(lm.tokenizer_json);
  x.tokenizer_config_json_text = slurp(lm.tokenizer_config_json);
  if (x.tokenizer_json_text.empty() && lm.tokenizer) {  // e.g. from GGUF: write the HF form of the same tokenizer
    x.tokenizer_json_text = lm.tokenizer->to_hf_json();
    x.tokenizer_config_json_text = lm.tokenizer->to_hf_config_json();
  }
  io::export_hf_dir(*lm.model, o.out, x);
  if (x.tokenizer_json_text.empty())
    std::fprintf(stderr, "temper convert: warning: %s has no tokenizer; no tokenizer.json written\n", o.in.c_str());
  std::fprintf(stderr, "temper convert: %s (%s) -> %s (Hugging Face, %s)\n", o.in.c_str(), lm.format.c_str(),
               o.out.c_str(), dt.c_str());
  return 0;
}

}  // namespace temper::app
