#include "temper/model/kv_cache.h"

#include "temper/core/error.h"

namespace temper {

void KvCache::reset(const ModelConfig& c, int64_t max_len_) {
  TEMPER_CHECK(max_len_ > 0 && max_len_ <= c.max_position_embeddings)
      << "KV cache length " << max_len_ << " must be in [1, max_position_embeddings = " << c.max_position_embeddings << "]";
  max_len = max_len_;
  len = 0;
  row = c.num_kv_heads * c.head_dim;
  layers = c.num_layers;
  k.assign(static_cast<size_t>(layers * max_len * row), 0.f);
  v.assign(static_cast<size_t>(layers * max_len * row), 0.f);
}

}  // namespace temper
