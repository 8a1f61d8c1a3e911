// Rotary position embedding, Hugging Face rotate-half convention (LlamaRotaryEmbedding /
// apply_rotary_pos_emb): x' = x*cos + rotate_half(x)*sin, frequencies inv_freq[i] =
// rope_theta^(-2i/D) computed in float32 as HF does, optionally rescaled (modeling_rope_utils.py of
// transformers 4.51.3: linear, llama3, longrope; not dynamic NTK or YaRN). Backward = the inverse rotation.
#pragma once

#include <cstdint>
#include <vector>

namespace temper::kernels {

struct RopeTable {
  int64_t max_pos = 0, half = 0;
  std::vector<float> cos, sin;    // [max_pos, D/2], times attention_scaling
  std::vector<float> inv_freq;    // [D/2], after scaling
  float attention_scaling = 1.f;  // longrope's factor on cos and sin (1 otherwise)
};

// A config's rope_scaling (HF names: rope_type, factor, low_freq_factor, high_freq_factor,
// original_max_position_embeddings, short_factor, long_factor, attention_factor).
struct RopeScaling {
  enum class Type { none, linear, llama3, longrope } type = Type::none;
  double factor = 1.0;  // linear, llama3; longrope: max_position_embeddings / original_max
  double low_freq_factor = 1.0, high_freq_factor = 4.0;  // llama3
  int64_t original_max_position = 0;                     // llama3, longrope
  std::vector<double> short_factor, long_factor;         // longrope: D/2 each
  double attention_factor = 0.0;  // longrope: 0 = HF's default sqrt(1 + ln(factor)/ln(original_max)); else given
  bool use_long = false;          // longrope: the long factors (HF uses them when seq_len > original_max)
};

// inv_freq [D/2] and the attention scaling of cos/sin, in HF's float32 op order.
std::vector<float> rope_inv_freq(int64_t D, double theta, const RopeScaling& scaling, float* attention_scaling);
RopeTable rope_table(int64_t max_pos, int64_t D, double theta, const RopeScaling& scaling);
RopeTable rope_table(int64_t max_pos, int64_t D, double theta);  // no scaling

// x: rows of H heads of D, row r (row_stride floats apart) at position pos[r]; in place.
void rope_fwd(float* x, const int32_t* pos, const RopeTable& t, int64_t rows, int64_t H, int64_t D, int64_t row_stride);
void rope_bwd(float* dx, const int32_t* pos, const RopeTable& t, int64_t rows, int64_t H, int64_t D,
              int64_t row_stride);

}  // namespace temper::kernels
