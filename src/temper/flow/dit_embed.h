// The DiT's input and output ends (facebookresearch/DiT models.py): images to patch rows and back, the
// fixed 2-D sin-cos position embedding, and the timestep sinusoid. Patch rows for the embedding are in
// the convolution weight's (channel, row, column) order; the final layer's rows are unpatchify's (row,
// column, channel) order. Sinusoids are computed in double and rounded once.
#pragma once

#include <cstdint>
#include <vector>

namespace temper::flow {

// x [B, C, S, S] -> rows [B*T, C*p*p], token (gi, gj) at row b*T + gi*(S/p) + gj.
void patchify(const float* x, int64_t B, int64_t C, int64_t S, int64_t p, float* rows);
// rows [B*T, p*p*C] ((i, j, c) order) -> x [B, C, S, S]; unpatchify_bwd is its transpose (dx -> drows).
void unpatchify(const float* rows, int64_t B, int64_t C, int64_t S, int64_t p, float* x);
void unpatchify_bwd(const float* dx, int64_t B, int64_t C, int64_t S, int64_t p, float* drows);

// [grid^2, C]: columns [0, C/2) the sin-cos of the token's column index, [C/2, C) of its row index
// (DiT's get_2d_sincos_pos_embed; each half is [sin(pos w_k), cos(pos w_k)], w_k = 10000^(-k / (C/4))).
std::vector<float> sincos_pos_embed(int64_t C, int64_t grid);

// out [B, dim] = [cos(s f_k), sin(s f_k)], s = t[b] * t_scale, f_k = 10000^(-k / (dim/2)).
void timestep_embedding(const float* t, int64_t B, int64_t dim, double t_scale, float* out);

}  // namespace temper::flow
