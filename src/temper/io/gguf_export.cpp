#include "temper/io/gguf_export.h"

#include <cstring>
#include <memory>
#include <vector>

#include "temper/core/error.h"
#include "temper/io/gguf_model.h"
#include "temper/io/gguf_writer.h"

namespace temper::io {

namespace {

// llama_ftype (llama.h): what general.file_type says the bulk of the weights are.
uint32_t file_type_code(GgmlType matrix_type) {
  switch (matrix_type) {
    case GgmlType::f32:
      return 0;  // LLAMA_FTYPE_ALL_F32
    case GgmlType::f16:
      return 1;  // LLAMA_FTYPE_MOSTLY_F16
    case GgmlType::q8_0:
      return 7;  // LLAMA_FTYPE_MOSTLY_Q8_0
    case GgmlType::bf16:
      return 32;  // LLAMA_FTYPE_MOSTLY_BF16
    default:
      break;
  }
  TEMPER_FAIL() << "GGUF export: matrix type " << ggml_type_name(matrix_type)
                << " is not supported (supported: F32, F16, BF16, Q8_0)";
}

// The family's keys beyond the shape (llama.cpp's names): Gemma's soft-caps and windows, Mistral's window (a key
// llama.cpp's llama arch ignores; temper reads it back), RoPE scaling. query_pre_attn_scalar is temper's own key
// (llama.cpp derives the scale from the model size).
void add_arch_keys(GgufWriter& w, const ModelConfig& c, const std::string& p) {
  using T = kernels::RopeScaling::Type;
  if (c.sliding_window > 0)
    w.add_kv(p + "attention.sliding_window", GgufValue::u32(static_cast<uint32_t>(c.sliding_window)));
  if (c.arch == Arch::gemma2 || c.arch == Arch::gemma3) {
    w.add_kv(p + "attention.query_pre_attn_scalar", GgufValue::f32(static_cast<float>(c.query_pre_attn_scalar)));
    if (c.final_softcap > 0)
      w.add_kv(p + "final_logit_softcapping", GgufValue::f32(static_cast<float>(c.final_softcap)));
  }
  if (c.arch == Arch::gemma2 && c.attn_softcap > 0)
    w.add_kv(p + "attn_logit_softcapping", GgufValue::f32(static_cast<float>(c.attn_softcap)));
  if (c.arch == Arch::gemma3) {
    w.add_kv(p + "attention.sliding_window_pattern", GgufValue::u32(static_cast<uint32_t>(c.sliding_pattern)));
    w.add_kv(p + "rope.freq_base_swa", GgufValue::f32(static_cast<float>(c.rope_local_theta)));
  }
  const kernels::RopeScaling& r = c.rope_scaling;
  if (r.type == T::linear) {
    w.add_kv(p + "rope.scaling.type", GgufValue::string("linear"));
    w.add_kv(p + "rope.scaling.factor", GgufValue::f32(static_cast<float>(r.factor)));
  } else if (r.type == T::longrope) {
    w.add_kv(p + "rope.scaling.original_context_length",
             GgufValue::u32(static_cast<uint32_t>(r.original_max_position)));
    float attn = 1.f;
    kernels::rope_inv_freq(c.head_dim, c.rope_theta, r, &attn);
    w.add_kv(p + "rope.scaling.attn_factor", GgufValue::f32(attn));
  }
  TEMPER_CHECK(r.type != T::linear || c.arch == Arch::llama || c.arch == Arch::gemma3)
      << "GGUF export: linear RoPE scaling on " << arch_name(c.arch) << " has no llama.cpp key";
}

// Llama-3's scaling as llama.cpp's rope_freqs (each frequency's divisor), Phi-3's as rope_factors_long/short.
void add_rope_tensors(GgufWriter& w, const ModelConfig& c) {
  using T = kernels::RopeScaling::Type;
  const kernels::RopeScaling& r = c.rope_scaling;
  const int64_t half = c.head_dim / 2;
  auto put = [&](const std::string& name, std::vector<float> v) {
    auto data = std::make_shared<std::vector<float>>(std::move(v));
    w.add_tensor(name, Shape({half}), GgmlType::f32,
                 [data](float* dst) { std::copy(data->begin(), data->end(), dst); });
  };
  if (r.type == T::llama3) {
    float unused = 1.f;
    const std::vector<float> base = kernels::rope_inv_freq(c.head_dim, c.rope_theta, {}, &unused);
    const std::vector<float> scaled = kernels::rope_inv_freq(c.head_dim, c.rope_theta, r, &unused);
    std::vector<float> ff(static_cast<size_t>(half));
    for (size_t i = 0; i < ff.size(); ++i) ff[i] = base[i] / scaled[i];
    put("rope_freqs.weight", ff);
  } else if (r.type == T::longrope) {
    put("rope_factors_long.weight", std::vector<float>(r.long_factor.begin(), r.long_factor.end()));
    put("rope_factors_short.weight", std::vector<float>(r.short_factor.begin(), r.short_factor.end()));
  }
}

}  // namespace

GgmlType gguf_export_type(const Shape& shape, GgmlType matrix_type) {
  if (shape.rank() <= 1) return GgmlType::f32;
  if (matrix_type == GgmlType::q8_0 && shape[-1] % kQK != 0) return GgmlType::f16;
  return matrix_type;
}

void save_gguf_model(const Transformer& model, const std::string& path, const GgufExportOptions& options) {
  const ModelConfig& c = model.config();
  c.validate(path);
  const uint32_t file_type = file_type_code(options.matrix_type);
  const std::string arch = gguf_arch_name(c.arch);
  const std::string p = arch + ".";
  auto u32 = [&](const char* what, int64_t v) {
    TEMPER_CHECK(v >= 0 && v <= 0xffffffffLL) << path << ": " << what << " = " << v << " does not fit u32";
    return GgufValue::u32(static_cast<uint32_t>(v));
  };

  GgufWriter w(options.alignment);
  w.add_kv("general.architecture", GgufValue::string(arch));
  w.add_kv("general.alignment", GgufValue::u32(options.alignment));
  w.add_kv("general.file_type", GgufValue::u32(file_type));
  w.add_kv("general.quantization_version", GgufValue::u32(2));  // GGML_QNT_VERSION
  w.add_kv(p + "block_count", u32("num_layers", c.num_layers));
  w.add_kv(p + "context_length", u32("max_position_embeddings", c.max_position_embeddings));
  w.add_kv(p + "embedding_length", u32("hidden_size", c.hidden_size));
  w.add_kv(p + "feed_forward_length", u32("intermediate_size", c.intermediate_size));
  w.add_kv(p + "attention.head_count", u32("num_heads", c.num_heads));
  w.add_kv(p + "attention.head_count_kv", u32("num_kv_heads", c.num_kv_heads));
  w.add_kv(p + "attention.key_length", u32("head_dim", c.head_dim));
  w.add_kv(p + "attention.value_length", u32("head_dim", c.head_dim));
  w.add_kv(p + "rope.freq_base", GgufValue::f32(static_cast<float>(c.rope_theta)));
  w.add_kv(p + "attention.layer_norm_rms_epsilon", GgufValue::f32(static_cast<float>(c.rms_norm_eps)));
  w.add_kv(p + "vocab_size", u32("vocab_size", c.vocab_size));
  if (c.arch == Arch::llama || c.arch == Arch::mistral)
    w.add_kv(p + "rope.dimension_count", u32("head_dim", c.head_dim));
  add_arch_keys(w, c, p);
  bool named = false;
  for (const auto& kv : options.metadata) named |= kv.first == "general.name";
  if (!named) w.add_kv("general.name", GgufValue::string(arch));  // llama.cpp's converter always names the model
  for (const auto& [key, value] : options.metadata) {
    bool reserved = key.rfind(p, 0) == 0 || key == "general.architecture" || key == "general.alignment" ||
                    key == "general.file_type" || key == "general.quantization_version";
    TEMPER_CHECK(!reserved) << path << ": metadata key '" << key
                            << "' is written by the exporter from the model config; do not pass it";
    w.add_kv(key, value);
  }

  const bool permute = gguf_arch_permutes_qk(c.arch), shift = gguf_arch_shifts_norms(c.arch);
  const ParamLayout& layout = model.layout();
  for (const ParamEntry& e : layout.entries()) {
    const std::string g = gguf_name_from_hf(e.name, c.arch);
    TEMPER_CHECK(!g.empty()) << path << ": parameter '" << e.name << "' has no llama.cpp name";
    const GgmlType type = gguf_export_type(e.shape, options.matrix_type);
    const float* src = model.params() + e.offset;
    const bool is_q = e.name.find(".self_attn.q_proj.") != std::string::npos;
    const bool is_k = e.name.find(".self_attn.k_proj.") != std::string::npos;
    const int64_t n = e.numel();
    if (permute && (is_q || is_k)) {
      const int64_t n_head = is_q ? c.num_heads : c.num_kv_heads, head_dim = c.head_dim;
      const int64_t cols = e.shape.rank() == 2 ? e.shape[1] : 1;
      w.add_tensor(g, e.shape, type, [src, n, n_head, head_dim, cols](float* dst) {
        std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
        gguf_permute_qk_rows(dst, n_head, head_dim, cols);
      });
    } else if (shift && gguf_is_norm(e.name)) {  // llama.cpp's Gemma norms hold 1 + w
      w.add_tensor(g, e.shape, type, [src, n](float* dst) {
        for (int64_t i = 0; i < n; ++i) dst[i] = 1.0f + src[i];
      });
    } else {
      w.add_tensor(g, e.shape, type, src);
    }
  }
  add_rope_tensors(w, c);
  w.write(path);
}

}  // namespace temper::io
