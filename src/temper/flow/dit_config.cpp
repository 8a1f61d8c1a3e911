#include "temper/flow/dit_config.h"

#include <cmath>

#include "temper/core/error.h"

namespace temper::flow {

void DitConfig::validate() const {
  TEMPER_CHECK(image >= 1 && patch >= 1 && image % patch == 0)
      << "[model] image = " << image << ", patch = " << patch << ": expected image a positive multiple of patch";
  TEMPER_CHECK(channels >= 1) << "[model] channels = " << channels << ": expected >= 1";
  TEMPER_CHECK(hidden >= 2 && hidden % 2 == 0) << "[model] hidden = " << hidden << ": expected an even number >= 2";
  TEMPER_CHECK(hidden % 4 == 0) << "[model] hidden = " << hidden
                                << ": expected a multiple of 4 (the 2-D sin-cos position embedding)";
  TEMPER_CHECK(heads >= 1 && hidden % heads == 0)
      << "[model] heads = " << heads << ": expected a divisor of hidden = " << hidden;
  TEMPER_CHECK(depth >= 1) << "[model] depth = " << depth << ": expected >= 1";
  TEMPER_CHECK(std::isfinite(mlp_ratio) && ffn() >= 1)
      << "[model] mlp_ratio = " << mlp_ratio << ": expected int(hidden * mlp_ratio) >= 1";
  TEMPER_CHECK(classes >= 1) << "[model] classes = " << classes << ": expected >= 1";
  TEMPER_CHECK(freq_dim >= 2 && freq_dim % 2 == 0)
      << "[model] freq_dim = " << freq_dim << ": expected an even number >= 2";
  TEMPER_CHECK(std::isfinite(t_scale) && t_scale > 0) << "[model] t_scale = " << t_scale << ": expected > 0";
}

void DitConfig::visit(KeyVisitor& v) {
  v("image", image, "image side S (images are channels x S x S)");
  v("channels", channels, "image channels C");
  v("patch", patch, "patch side p (image % patch == 0): (S/p)^2 tokens");
  v("hidden", hidden, "token width");
  v("depth", depth, "transformer blocks");
  v("heads", heads, "attention heads (hidden % heads == 0)");
  v("mlp_ratio", mlp_ratio, "MLP width / hidden (DiT: 4)");
  v("classes", classes, "class labels; one more null label for classifier-free guidance");
  v("freq_dim", freq_dim, "sinusoid width of the timestep embedding (DiT: 256)");
  v("t_scale", t_scale, "the timestep embedding sees t * t_scale (t in [0, 1]; DiT's steps: 1000, SiT: 1)");
  v("precision", precision, "products: f32, or bf16 (inputs rounded to bf16, f32 sums)", kDitPrecisionNames);
}

}  // namespace temper::flow
