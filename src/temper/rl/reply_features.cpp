#include "temper/rl/reply_features.h"

#include "temper/core/error.h"

namespace temper::rl {

void ReplyFeatureConfig::visit(KeyVisitor& v) {
  v("features", kind, "what the head reads: embedding (the frozen policy's mean hidden state), ngrams",
    kFeatureKindNames);
  v("ngram_dim", ngram_dim, "ngrams: hash buckets");
}

void ReplyFeatureConfig::validate(const std::string& section) const {
  TEMPER_CHECK(ngram_dim >= 16 && ngram_dim <= (1 << 20))
      << section << ".ngram_dim must be in [16, 1048576], got " << ngram_dim;
}

}  // namespace temper::rl
