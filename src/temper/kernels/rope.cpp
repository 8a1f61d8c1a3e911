#include "temper/kernels/rope.h"

#include <cmath>

#include "temper/core/error.h"
#include "temper/core/thread_pool.h"
#include "temper/kernels/cpu/isa_table.h"

namespace temper::kernels {

// Every step below is one float32 tensor op of HF's, in its order (this file has no FMA contraction:
// the default x86-64 flags). `s / t` with s a Python scalar is t.reciprocal() * s in torch; a Python
// scalar meeting a float32 tensor (arithmetic or comparison) is rounded to float32 first.
namespace {

// _compute_default_rope_parameters: 1.0 / (base ** (arange(0, D, 2).float() / D)); longrope multiplies
// the power by its factors before the reciprocal.
std::vector<float> base_inv_freq(int64_t D, double theta, const std::vector<double>* ext) {
  std::vector<float> f(static_cast<size_t>(D / 2));
  for (int64_t i = 0; i < D / 2; ++i) {
    const float expo = static_cast<float>(2 * i) / static_cast<float>(D);
    float p = std::pow(static_cast<float>(theta), expo);
    if (ext) p = static_cast<float>((*ext)[static_cast<size_t>(i)]) * p;
    f[static_cast<size_t>(i)] = 1.0f / p;
  }
  return f;
}

// _compute_llama3_parameters: low frequencies divided by factor, high ones kept, a smooth blend between.
void llama3_scale(std::vector<float>& f, const RopeScaling& s) {
  TEMPER_CHECK(s.factor > 0 && s.original_max_position > 0 && s.low_freq_factor > 0 &&
               s.high_freq_factor > s.low_freq_factor)
      << "rope_scaling llama3: needs factor > 0, original_max_position_embeddings > 0 and 0 < low_freq_factor < "
         "high_freq_factor; got factor "
      << s.factor << ", original_max_position_embeddings " << s.original_max_position << ", low_freq_factor "
      << s.low_freq_factor << ", high_freq_factor " << s.high_freq_factor;
  const double old_len = static_cast<double>(s.original_max_position);
  const float low_wavelen = static_cast<float>(old_len / s.low_freq_factor);
  const float high_wavelen = static_cast<float>(old_len / s.high_freq_factor);
  const float factor = static_cast<float>(s.factor), two_pi = static_cast<float>(2 * M_PI);
  const float old_f = static_cast<float>(old_len), low = static_cast<float>(s.low_freq_factor);
  const float span = static_cast<float>(s.high_freq_factor - s.low_freq_factor);
  for (float& x : f) {
    const float wavelen = (1.0f / x) * two_pi;
    const float scaled = wavelen > low_wavelen ? x / factor : x;
    const float smooth = ((1.0f / wavelen) * old_f - low) / span;
    const float smoothed = (1.0f - smooth) * scaled / factor + smooth * scaled;
    const bool medium = !(wavelen < high_wavelen) && !(wavelen > low_wavelen);
    x = medium ? smoothed : scaled;
  }
}

// _compute_longrope_parameters: per-frequency factors; cos and sin scaled by the attention factor.
std::vector<float> longrope_inv_freq(int64_t D, double theta, const RopeScaling& s, float* attention_scaling) {
  const std::vector<double>& ext = s.use_long ? s.long_factor : s.short_factor;
  TEMPER_CHECK(static_cast<int64_t>(ext.size()) == D / 2)
      << "rope_scaling longrope: " << (s.use_long ? "long_factor" : "short_factor") << " has " << ext.size()
      << " entries, expected head_dim / 2 = " << D / 2;
  TEMPER_CHECK(s.original_max_position > 0 && s.factor > 0)
      << "rope_scaling longrope: needs original_max_position_embeddings > 0 and factor > 0, got "
      << s.original_max_position << " and " << s.factor;
  double att = s.attention_factor;
  if (att == 0.0)
    att = s.factor <= 1.0 ? 1.0
                          : std::sqrt(1 + std::log(s.factor) / std::log(static_cast<double>(s.original_max_position)));
  *attention_scaling = static_cast<float>(att);
  return base_inv_freq(D, theta, &ext);
}

}  // namespace

std::vector<float> rope_inv_freq(int64_t D, double theta, const RopeScaling& scaling, float* attention_scaling) {
  TEMPER_CHECK(D > 0 && D % 2 == 0) << "RoPE needs an even head dim, got " << D;
  *attention_scaling = 1.f;
  switch (scaling.type) {
    case RopeScaling::Type::none:
      return base_inv_freq(D, theta, nullptr);
    case RopeScaling::Type::linear: {
      TEMPER_CHECK(scaling.factor > 0) << "rope_scaling linear: factor must be > 0, got " << scaling.factor;
      std::vector<float> f = base_inv_freq(D, theta, nullptr);
      for (float& x : f) x = x / static_cast<float>(scaling.factor);  // inv_freq /= factor
      return f;
    }
    case RopeScaling::Type::llama3: {
      std::vector<float> f = base_inv_freq(D, theta, nullptr);
      llama3_scale(f, scaling);
      return f;
    }
    case RopeScaling::Type::longrope:
      return longrope_inv_freq(D, theta, scaling, attention_scaling);
  }
  TEMPER_FAIL() << "unknown RoPE scaling type";
}

RopeTable rope_table(int64_t max_pos, int64_t D, double theta, const RopeScaling& scaling) {
  RopeTable t;
  t.inv_freq = rope_inv_freq(D, theta, scaling, &t.attention_scaling);
  t.max_pos = max_pos;
  t.half = D / 2;
  t.cos.resize(static_cast<size_t>(max_pos * t.half));
  t.sin.resize(static_cast<size_t>(max_pos * t.half));
  const float att = t.attention_scaling;
  for (int64_t i = 0; i < t.half; ++i) {
    const float inv_freq = t.inv_freq[static_cast<size_t>(i)];
    for (int64_t p = 0; p < max_pos; ++p) {
      float f = static_cast<float>(p) * inv_freq;  // float32 product, as HF's matmul of float tensors
      t.cos[static_cast<size_t>(p * t.half + i)] = static_cast<float>(std::cos(static_cast<double>(f))) * att;
      t.sin[static_cast<size_t>(p * t.half + i)] = static_cast<float>(std::sin(static_cast<double>(f))) * att;
    }
  }
  return t;
}

RopeTable rope_table(int64_t max_pos, int64_t D, double theta) {
  return rope_table(max_pos, D, theta, RopeScaling{});
}

namespace {
void rope_apply(float* x, const int32_t* pos, const RopeTable& t, int64_t rows, int64_t H, int64_t D,
                int64_t row_stride, bool inverse) {
  TEMPER_CHECK(D / 2 == t.half) << "RoPE table built for head dim " << 2 * t.half << ", used with " << D;
  for (int64_t r = 0; r < rows; ++r)
    TEMPER_CHECK(pos[r] >= 0 && pos[r] < t.max_pos) << "position " << pos[r] << " outside RoPE table [0, " << t.max_pos << ")";
  const IsaTable& k = isa_table();
  parallel_for(rows, 8, [&](int64_t b, int64_t e) {
    k.rope(x + b * row_stride, pos + b, t.cos.data(), t.sin.data(), e - b, H, D, row_stride, inverse);
  });
}
}  // namespace

void rope_fwd(float* x, const int32_t* pos, const RopeTable& t, int64_t rows, int64_t H, int64_t D, int64_t row_stride) {
  rope_apply(x, pos, t, rows, H, D, row_stride, false);
}

void rope_bwd(float* dx, const int32_t* pos, const RopeTable& t, int64_t rows, int64_t H, int64_t D,
              int64_t row_stride) {
  rope_apply(dx, pos, t, rows, H, D, row_stride, true);
}

}  // namespace temper::kernels
