// What a discriminator head (the discriminator reward, the Turing reward's discriminator judge) reads of a reply:
//   "embedding"  the frozen starting policy's mean final hidden state over the reply's tokens after its prompt
//                (MethodEnv::embed; the trainer then holds the frozen copy), the default;
//   "ngrams"     hashed character 1-3-grams of the reply's text, the same weighted by its context's, and two
//                length features (rl/ngram_features.h): no model, and it sees surface style the embeddings of a
//                small model blur (the spec's CPU-miniature judge).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "temper/core/settings.h"
#include "temper/tasks/task.h"

namespace temper::rl {

enum class FeatureKind { embedding, ngrams };
inline constexpr EnumNames<FeatureKind, 2> kFeatureKindNames{
    {{FeatureKind::embedding, "embedding"}, {FeatureKind::ngrams, "ngrams"}}};

struct ReplyFeatureConfig {
  FeatureKind kind = FeatureKind::embedding;
  int64_t ngram_dim = 1024;                         // ngrams: hash buckets (the features are 2 x ngram_dim + 2)
  void validate(const std::string& section) const;  // errors name section.features / section.ngram_dim
  void visit(KeyVisitor& v);
  bool needs_model() const { return kind == FeatureKind::embedding; }
};

// Features of one reply to problem p: its prompt's tokens, the reply's tokens as the head reads them, and the
// same reply as text.
using ReplyFeatures = std::function<std::vector<float>(const tasks::Problem& p, const std::vector<int32_t>& prompt,
                                                       const std::vector<int32_t>& reply, const std::string& text)>;

}  // namespace temper::rl
