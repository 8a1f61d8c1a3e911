// The DiT's shape (Peebles & Xie 2023, "Scalable Diffusion Models with Transformers"; SiT uses the same
// network): images [C, S, S] cut into p x p patches (T = (S/p)^2 tokens), hidden width, blocks, heads, the
// MLP's ratio, the classes (plus one null label for classifier-free guidance), the timestep embedding's
// frequencies and the factor on t before it (DiT: integer steps 0..999; SiT: t in [0, 1], factor 1), and the
// products' precision. The recipe keys under [model] (kind = "dit").
#pragma once

#include <cstdint>

#include "temper/core/settings.h"
#include "temper/kernels/matmul.h"

namespace temper::flow {

struct DitConfig {
  int64_t image = 16;       // S: images are S x S
  int64_t channels = 3;     // C
  int64_t patch = 4;        // p: S % p == 0
  int64_t hidden = 64;      // width of the token rows
  int64_t depth = 2;        // blocks
  int64_t heads = 4;        // hidden % heads == 0
  double mlp_ratio = 4.0;   // FFN width = int(hidden * mlp_ratio), as DiT
  int64_t classes = 10;     // labels 0..classes-1; label `classes` is the null label
  int64_t freq_dim = 256;   // sinusoid width of the timestep embedding (DiT's frequency_embedding_size)
  double t_scale = 1000.0;  // the timestep embedding sees t * t_scale
  kernels::Precision precision = kernels::Precision::f32;  // the products: f32, or bf16 inputs with f32 sums

  int64_t grid() const { return image / patch; }
  int64_t tokens() const { return grid() * grid(); }
  int64_t ffn() const { return static_cast<int64_t>(static_cast<double>(hidden) * mlp_ratio); }
  int64_t patch_dim() const { return channels * patch * patch; }
  int64_t dim() const { return channels * image * image; }
  int64_t head_dim() const { return hidden / heads; }

  void validate() const;  // throws naming the key and what was expected
  void visit(KeyVisitor& v);
};

inline constexpr EnumNames<kernels::Precision, 2> kDitPrecisionNames{
    {{kernels::Precision::f32, "f32"}, {kernels::Precision::bf16, "bf16"}}};

}  // namespace temper::flow
