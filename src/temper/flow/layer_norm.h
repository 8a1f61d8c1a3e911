// Layer norm without affine parameters (torch.nn.LayerNorm(C, elementwise_affine=False): biased variance,
// eps inside the root) and adaLN's modulation on top of it (DiT's modulate(norm(x), shift, scale) =
// norm(x) * (1 + scale[b]) + shift[b], one shift/scale row per item b over its T token rows), fused: one
// pass writes the normalised rows h, their 1/std and the modulated rows a. Backwards from h and 1/std.
// Sums over an item's rows run in row order inside one task: the same bits for any thread count.
#pragma once

#include <cstdint>

namespace temper::flow {

// h = (x - mean) * rstd per row of C; rstd = 1 / sqrt(var + eps).
void layer_norm_fwd(const float* x, float* h, float* rstd, int64_t rows, int64_t C, float eps);
// dx = rstd * (dh - mean(dh) - h * mean(dh * h)), added to dx when accumulate.
void layer_norm_bwd(const float* dh, const float* h, const float* rstd, float* dx, int64_t rows, int64_t C,
                    bool accumulate);

// Item b's shift and scale rows: shift + b * ld, scale + b * ld (columns of DiT's adaLN output).
struct Modulation {
  const float* shift;
  const float* scale;
  int64_t ld;
};

// x [B*T, C] -> h, rstd [B*T] and a = h * (1 + scale[b]) + shift[b].
void adaln_fwd(const float* x, int64_t B, int64_t T, int64_t C, float eps, Modulation m, float* h, float* rstd,
               float* a);
// Given da = d loss / d a: dshift[b] = sum_t da, dscale[b] = sum_t da * h (rows b * dld, written) and
// dx += layer_norm_bwd(da * (1 + scale[b])).
void adaln_bwd(const float* da, const float* h, const float* rstd, int64_t B, int64_t T, int64_t C, Modulation m,
               float* dshift, float* dscale, int64_t dld, float* dx);

}  // namespace temper::flow
