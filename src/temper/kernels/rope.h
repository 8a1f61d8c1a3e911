// Rotary position embedding, Hugging Face rotate-half convention (LlamaRotaryEmbedding /
// apply_rotary_pos_emb): x' = x*cos + rotate_half(x)*sin, frequencies inv_freq[i] =
// rope_theta^(-2i/D) computed in float32 as HF does. Backward = the inverse rotation.
#pragma once

#include <cstdint>
#include <vector>

namespace temper::kernels {

struct RopeTable {
  int64_t max_pos = 0, half = 0;
  std::vector<float> cos, sin;  // [max_pos, D/2]
};

RopeTable rope_table(int64_t max_pos, int64_t D, double theta);

// x: rows of H heads of D, row r (row_stride floats apart) at position pos[r]; in place.
void rope_fwd(float* x, const int32_t* pos, const RopeTable& t, int64_t rows, int64_t H, int64_t D, int64_t row_stride);
void rope_bwd(float* dx, const int32_t* pos, const RopeTable& t, int64_t rows, int64_t H, int64_t D,
              int64_t row_stride);

}  // namespace temper::kernels
